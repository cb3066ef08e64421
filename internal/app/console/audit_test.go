package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/audit"
)

// userHeader is the header the audit test's console reads who from.
const userHeader = "X-Forwarded-User"

// doAs is do with userHeader set to user when not "".
func doAs(t *testing.T, method, url, body, token, user string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// auditRow is a row of shardid.console_audit as the test reads it.
type auditRow struct {
	Who, Action, Result string
	Params              map[string]any
}

// Every action asked through the console with the token is in the
// catalog's audit log with who asked (the --user-header's value, else the
// client's address), what and the result, a refusal with its error line;
// /api/audit and /audit show them newest first; the audit log never
// changes an action's answer, even when it cannot be written. (Failed
// before: no audit log, /api/audit was 404.)
func TestConsoleAuditLog(t *testing.T) {
	tc := newTestCluster(t, 1, 1, 4, 1)
	token := "0123456789abcdef0123456789abcdef"
	base, _ := tc.serve(t, Options{Actions: true, Token: token, UserHeader: userHeader})
	cat := pgtest.Pool(t, tc.cfg.Catalog)
	ctx := context.Background()
	rows := func() []auditRow {
		t.Helper()
		r, err := cat.Query(ctx, `SELECT who, action, result, params FROM shardid.console_audit ORDER BY id`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(r, func(r pgx.CollectableRow) (auditRow, error) {
			var a auditRow
			return a, r.Scan(&a.Who, &a.Action, &a.Result, &a.Params)
		})
		require.NoError(t, err)
		return out
	}

	// The table is the toolkit role's, nothing granted to PUBLIC.
	var owner string
	var public bool
	require.NoError(t, cat.QueryRow(ctx, `SELECT c.relowner::regrole::text, EXISTS (SELECT FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a WHERE a.grantee = 0)
		FROM pg_class c WHERE c.oid = 'shardid.console_audit'::regclass`).Scan(&owner, &public))
	require.Equal(t, "postgres", owner, "the toolkit's role (the DSN's) owns it")
	require.False(t, public, "PUBLIC holds no privilege on shardid.console_audit")

	// Without the token: refused and not recorded (anyone could fill the
	// catalog otherwise).
	code, body := doAs(t, http.MethodPost, base+"/api/actions/cleanup", `{"confirm":"cleanup"}`, "", "mallory")
	require.Equal(t, http.StatusForbidden, code, body)
	require.Empty(t, rows())

	// An action that succeeds, as alice: its answer is the action's.
	code, body = doAs(t, http.MethodPost, base+"/api/actions/cleanup", `{"confirm":"cleanup","all":true}`, token, "alice")
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, body, `"error"`)
	require.NotContains(t, body, `"audit_error"`)
	// A request refused for its input, as bob: 400 as before, recorded
	// with its error line.
	code, body = doAs(t, http.MethodPost, base+"/api/actions/abort", `{"confirm":"abort","shards":[3],"mode":"fast"}`, token, "bob")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `mode \"fast\": want auto, online or offline`)
	// Without the header: the client's address.
	code, body = doAs(t, http.MethodPost, base+"/api/actions/abort", `{}`, token, "")
	require.Equal(t, http.StatusBadRequest, code, body)

	got := rows()
	require.Len(t, got, 3)
	require.Equal(t, auditRow{Who: "alice", Action: "cleanup", Result: "ok",
		Params: map[string]any{"all": true, "shards": []any{}, "mode": ""}}, got[0])
	require.Equal(t, auditRow{Who: "bob", Action: "abort", Result: `mode "fast": want auto, online or offline`,
		Params: map[string]any{"all": false, "shards": []any{float64(3)}, "mode": "fast"}}, got[1])
	require.Equal(t, "127.0.0.1", got[2].Who)
	require.Equal(t, `not confirmed: send {"confirm":"abort"}`, got[2].Result)

	// /api/audit: newest first, in its golden shape; paged.
	code, ctype, body := get(t, base+"/api/audit")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "application/json", ctype)
	require.Equal(t, golden(t, "console-audit.json.shape"), shapeOf(t, body))
	var page struct {
		Entries []audit.Entry `json:"entries"`
		More    bool          `json:"more"`
		Next    string        `json:"next"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Len(t, page.Entries, 3)
	require.Equal(t, []string{"127.0.0.1", "bob", "alice"}, []string{page.Entries[0].Who, page.Entries[1].Who, page.Entries[2].Who})
	require.Equal(t, "ok", page.Entries[2].Result)
	require.NotNil(t, page.Entries[2].DurationMS, "a finished action has its duration")
	require.False(t, page.More)
	require.Empty(t, page.Next)

	_, _, body = get(t, base+"/api/audit?limit=2")
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Len(t, page.Entries, 2)
	require.True(t, page.More)
	require.Equal(t, "bob", page.Entries[1].Who)
	_, _, body = get(t, base+page.Next)
	page.Entries = nil
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Len(t, page.Entries, 1)
	require.Equal(t, "alice", page.Entries[0].Who)
	require.False(t, page.More)

	// /audit renders them, newest first, linked from every page.
	code, _, html := get(t, base+"/audit")
	require.Equal(t, http.StatusOK, code, html)
	for _, s := range []string{"alice", "bob", "cleanup", "abort", `mode &#34;fast&#34;: want auto, online or offline`, userHeader} {
		require.Contains(t, html, s)
	}
	require.Less(t, strings.Index(html, ">bob<"), strings.Index(html, ">alice<"), "newest first")
	_, _, html = get(t, base+"/audit?limit=1")
	require.Contains(t, html, `id="audit-more"`)
	_, _, html = get(t, base+"/")
	require.Contains(t, html, `href="/audit"`)

	// Bad input: 400 and one line.
	for _, q := range []string{"limit=abc", "limit=0", "limit=100000", "before=-1", "before=x"} {
		code, _, body = get(t, base+"/api/audit?"+q)
		require.Equal(t, http.StatusBadRequest, code, q)
		var e map[string]string
		require.NoError(t, json.Unmarshal([]byte(body), &e), body)
		require.NotEmpty(t, e["error"], q)
		require.NotContains(t, e["error"], "\n", q)
		code, _, _ = get(t, base+"/audit?"+q)
		require.Equal(t, http.StatusBadRequest, code, q)
	}
	_, _, body = get(t, base+"/api/audit?limit=abc") // a 400, as above
	require.Contains(t, body, `limit \"abc\": want a number from 1 to 500`)

	// An action whose audit row cannot be written still answers with its
	// own status and result, and says the audit log missed it.
	_, err := cat.Exec(ctx, `ALTER TABLE shardid.console_audit ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`)
	require.NoError(t, err)
	code, body = doAs(t, http.MethodPost, base+"/api/actions/cleanup", `{"confirm":"cleanup"}`, token, "carol")
	require.Equal(t, http.StatusOK, code, body)
	var st actionState
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Empty(t, st.Error)
	require.NotNil(t, st.Finished)
	require.Contains(t, st.AuditError, "not recorded in the audit log")
	code, body = doAs(t, http.MethodPost, base+"/api/actions/cleanup", `{"confirm":"no"}`, token, "carol")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `not confirmed`)
	_, err = cat.Exec(ctx, `ALTER TABLE shardid.console_audit DROP CONSTRAINT refuse_all`)
	require.NoError(t, err)
	require.Len(t, rows(), 3, "the rows written before")
}

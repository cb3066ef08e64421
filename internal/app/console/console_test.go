package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/jsonshape"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// golden is a golden shape file of the CLI (testdata/golden).
func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "golden", name))
	require.NoError(t, err)
	return string(b)
}

func shapeOf(t *testing.T, body string) string {
	t.Helper()
	s, err := jsonshape.Of([]byte(body))
	require.NoError(t, err, body)
	return s
}

// css is a CSS selector.
type css = chromedp.CSS

// countActive is a script that counts, per host row of the map, the
// active shards its strip's runs cover.
const countActive = `(() => { const out = {};
	document.querySelectorAll("table.map tbody tr").forEach(tr => {
		let n = 0;
		tr.querySelectorAll(".run.k-active").forEach(r => n += Number(r.dataset.to) - Number(r.dataset.from) + 1);
		out[tr.dataset.host] = n; });
	return out; })()`

// A read-only console on a real cluster, in a real browser: the map has
// each host's shards, a click shows a shard, the decoder decodes, verify
// runs from its button, its JSON has the CLI's shapes, nothing shows a
// password, and nothing changes the cluster.
func TestConsoleReadOnly(t *testing.T) {
	tc := newTestCluster(t, 2, 2, 16, 5)
	base, _ := tc.serve(t, Options{})
	tab := browse(t)
	ctx := context.Background()

	st, err := install.ClusterStatus(ctx, tc.c)
	require.NoError(t, err)
	require.Len(t, st.Hosts, 2)

	t.Run("map", func(t *testing.T) {
		run(t, tab, "map", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`table.map`)))
		counts := eval(t, tab, "count", chromedp.Evaluate[map[string]int](countActive))
		want := map[string]int{}
		for _, h := range st.Hosts {
			want[h.Name] = len(h.Shards)
		}
		require.Equal(t, want, counts, "shards per host on the map")
		require.Equal(t, 8, counts["pg1"])
		require.Equal(t, "8", text(t, tab, `#host-pg1 td.count`))
		require.Equal(t, "16", text(t, tab, `#shard-total`))
		legend := text(t, tab, `.legend`)
		for _, w := range []string{"active", "moving", "read-only", "incoming", "retained"} {
			require.Contains(t, legend, w, "the legend says in words what each colour means")
		}
		require.Contains(t, text(t, tab, `#host-pg1 .ranges`), "active (8)")

		// Each host says who it is: its role and its server's system
		// identifier, as `shardid host list` reads them.
		var sysid string
		require.NoError(t, pgtest.Pool(t, tc.hostDSN(t, "pg1")).QueryRow(ctx, `SELECT system_identifier::text FROM pg_catalog.pg_control_system()`).Scan(&sysid))
		require.Equal(t, "primary", text(t, tab, `#host-pg1 .role`))
		require.Equal(t, sysid, text(t, tab, `#host-pg1 .sysid`))
		require.Regexp(t, `^127\.0\.0\.1:\d+$`, text(t, tab, `#host-pg1 .reached`))

		// A click on pg2's strip shows one of pg2's shards.
		run(t, tab, "click a shard", chromedp.Click(css(`#host-pg2 .run.k-active`)), chromedp.WaitVisible(css(`#shard-detail dl`)))
		detail := text(t, tab, `#shard-detail`)
		require.Contains(t, detail, "pg2")
		require.Contains(t, detail, "likes", "the shard's tables")
		require.Contains(t, detail, "Generator")
		require.Regexp(t, `safe, version \d+`, detail, "the generator's variant and version")
		require.Regexp(t, `Counter\s+\d+`, detail, "the counter's position")

		// The shard form works without JavaScript too.
		code, _, page := get(t, base+"/?shard=3")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, page, `id="shard-3"`)

		// Keyboard users have the shard form.
		run(t, tab, "shard form", chromedp.SendKeys(css(`#shard-input`), "3"), chromedp.Click(css(`#shard-form button`)),
			chromedp.WaitVisible(css(`#shard-3`)))
	})

	t.Run("decoder", func(t *testing.T) {
		run(t, tab, "decode", chromedp.Navigate(base+"/decode"), chromedp.WaitVisible(css(`#ids`)),
			chromedp.SendKeys(css(`#ids`), "4041150592192615424"), chromedp.Submit(css(`#ids`)),
			chromedp.WaitVisible(css(`#decoded`)))
		require.Equal(t, "5", text(t, tab, `#decoded td.shard`))
		require.Equal(t, "0", text(t, tab, `#decoded td.seq`))
		require.Contains(t, text(t, tab, `#decoded tbody`), "2026-11-29T14:31:52.784Z")
		// Another layout, chosen from the list.
		run(t, tab, "decode snowflake", chromedp.Navigate(base+"/decode"), chromedp.WaitVisible(css(`#ids`)),
			chromedp.SetValue(css(`#layout`), "snowflake"), chromedp.SendKeys(css(`#ids`), "175928847299117063"), chromedp.Submit(css(`#ids`)),
			chromedp.WaitVisible(css(`#decoded`)))
		got := text(t, tab, `#decoded tbody`)
		require.Contains(t, got, "175928847299117063")
		require.Contains(t, got, "2012-03-03T13:01:20.453Z")
	})

	t.Run("verify", func(t *testing.T) {
		run(t, tab, "checks", chromedp.Navigate(base+"/checks"), chromedp.WaitVisible(css(`#run-verify`)))
		vctx, cancel := context.WithTimeout(tab, 10*time.Minute)
		defer cancel()
		require.NoError(t, chromedp.Do(vctx, chromedp.Click(css(`#run-verify`)), chromedp.WaitVisible(css(`#verify-verdict`))), "verify from the button")
		verdict := text(t, tab, `#verify-verdict`)
		require.True(t, strings.HasPrefix(verdict, "OK"), verdict)
		checks := eval(t, tab, "checks", chromedp.Evaluate[int](`document.querySelectorAll("#checks-table tbody tr").length`))
		require.Greater(t, checks, 3, "one row per check")
		require.Contains(t, text(t, tab, `#verify-log`), "verify: ok: 16 shards on 2 hosts")
		// The migrations panel: every shard at the latest version.
		run(t, tab, "migrations", chromedp.WaitVisible(css(`#versions`)))
		require.Contains(t, text(t, tab, `#migrations`), "Every shard is at version 2")
	})

	t.Run("json has the CLI's shapes", func(t *testing.T) {
		for _, c := range []struct{ path, golden string }{
			{"/api/status", "status.json.shape"},
			{"/api/hosts", "host-list.json.shape"},
			{"/api/verify", "verify.json.shape"}, // the run of the verify subtest
			{"/api/migrations", "migrate-status.json.shape"},
			{"/api/decode?id=4041150592192615424", "id-decode.json.shape"},
			{"/api/decode?layout=snowflake&id=175928847299117063", "id-decode-snowflake.json.shape"},
		} {
			code, ctype, body := get(t, base+c.path)
			require.Equal(t, http.StatusOK, code, "%s: %s", c.path, body)
			require.Equal(t, "application/json", ctype, c.path)
			require.Equal(t, golden(t, c.golden), shapeOf(t, body), c.path)
		}
		// The values too: the console's status is the CLI's.
		_, _, body := get(t, base+"/api/status")
		var got install.Status
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		require.Equal(t, st.Generation, got.Generation)
		require.Equal(t, st.Hosts, got.Hosts)
		require.Equal(t, st.Shards, got.Shards)
	})

	t.Run("no password anywhere", func(t *testing.T) {
		for _, p := range []string{"/", "/moves", "/checks", "/decode", "/part/map", "/part/moves", "/part/migrations",
			"/part/verify", "/part/shard/0", "/part/shard/15", "/api/status", "/api/hosts", "/api/moves?all=1", "/api/verify",
			"/api/migrations", "/api/shard/0", "/api/shard/15"} {
			code, _, body := get(t, base+p)
			require.Equal(t, http.StatusOK, code, p)
			require.NotContains(t, body, secret, p)
		}
		run(t, tab, "map", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`table.map`)))
		dsn := text(t, tab, `#host-pg1 .dsn`)
		require.Contains(t, dsn, "127.0.0.1", "the host's identity is shown")
		require.NotContains(t, eval(t, tab, "page", chromedp.Evaluate[string](`document.documentElement.outerHTML`)), secret)
	})

	t.Run("read-only: no action control, action endpoints refuse", func(t *testing.T) {
		for _, p := range []string{"/", "/moves", "/checks", "/decode"} {
			run(t, tab, p, chromedp.Navigate(base+p), chromedp.WaitVisible(css(`main`)))
			n := eval(t, tab, p, chromedp.Evaluate[int](`document.querySelectorAll("button.action, dialog, [data-action], form[method=post], form[method=POST]").length`))
			require.Zero(t, n, "%s has a control that changes state", p)
			_, _, body := get(t, base+p)
			require.NotContains(t, body, "/api/actions", p)
		}
		for _, a := range []string{"apply", "abort", "cleanup", "nope"} {
			for _, token := range []string{"", "0123456789abcdef0123456789abcdef"} {
				code, _, body := do(t, http.MethodPost, base+"/api/actions/"+a, strings.NewReader(`{"confirm":"`+a+`"}`), token)
				require.Equal(t, http.StatusForbidden, code, "%s: %s", a, body)
			}
		}
		code, _, _ := get(t, base+"/api/actions/last")
		require.Equal(t, http.StatusForbidden, code)
		code, _, _ = get(t, base+"/api/actions/apply")
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed}, code)
		recs, err := rebalance.Moves(ctx, tc.c, true)
		require.NoError(t, err)
		require.Empty(t, recs, "nothing moved")
	})

	t.Run("guards", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, base+"/api/status", nil)
		require.NoError(t, err)
		req.Host = "attacker.example:8090"
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "a rebinding host name is refused")

		resp, err = http.Get(base + "/")
		require.NoError(t, err)
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
			require.Contains(t, csp, d, "a form or <base> injected into a page goes nowhere else")
		}

		req, err = http.NewRequest(http.MethodPost, base+"/api/verify", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "http://attacker.example")
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a POST from another origin is refused")
	})
}

// verify's problems stream into the page as they are found, and the
// checks table marks the check that failed (a cluster broken on
// purpose: shard 0's generator dropped).
func TestConsoleVerifyProblems(t *testing.T) {
	tc := newTestCluster(t, 1, 2, 4, 1)
	_, err := pgtest.Pool(t, tc.hostDSN(t, "pg1")).Exec(context.Background(), `DROP FUNCTION shard_0000.next_id() CASCADE`)
	require.NoError(t, err)
	base, _ := tc.serve(t, Options{})
	tab := browse(t)
	run(t, tab, "checks", chromedp.Navigate(base+"/checks"), chromedp.WaitVisible(css(`#run-verify`)))
	vctx, cancel := context.WithTimeout(tab, 10*time.Minute)
	defer cancel()
	require.NoError(t, chromedp.Do(vctx, chromedp.Click(css(`#run-verify`)), chromedp.WaitVisible(css(`#verify-verdict`))), "verify from the button")
	require.Contains(t, text(t, tab, `#verify-verdict`), "FAILED")
	log := text(t, tab, `#verify-log`)
	require.Contains(t, log, "FAIL ")
	require.Contains(t, log, "shard 0")
	failed := eval(t, tab, "failed checks", chromedp.Evaluate[int](`document.querySelectorAll("#checks-table .badge.bad").length`))
	require.Positive(t, failed)
	code, _, body := get(t, base+"/api/verify")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, golden(t, "verify-problems.json.shape"), shapeOf(t, body))
}

func TestCheckListen(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8090", "localhost:1", "[::1]:8090", "127.0.0.2:80"} {
		require.NoError(t, CheckListen(ok, false), ok)
	}
	for _, bad := range []string{"0.0.0.0:8090", ":8090", "10.1.2.3:8090", "example.com:8090"} {
		require.Error(t, CheckListen(bad, false), bad)
		require.NoError(t, CheckListen(bad, true), bad)
	}
}

// A dead console must not look live: once its refreshes fail the page says
// since when it shows nothing new, and why; the footer says when the last
// refresh succeeded.
func TestConsoleSaysWhenNotRefreshed(t *testing.T) {
	tc := newTestCluster(t, 1, 1, 2, 0)
	con, err := New(tc.c, Options{Migrations: tc.set, Refresh: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(con.Close)
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(srv.Close)
	tab := browse(t)
	run(t, tab, "map", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(css(`table.map`)))
	wait, cancel := context.WithTimeout(tab, 2*time.Minute)
	defer cancel()
	_, err = chromedp.Run(wait, chromedp.Poll[bool](`document.getElementById("refreshed").textContent.startsWith("Refreshed ")`))
	require.NoError(t, err, "a refresh is shown in the footer")
	require.True(t, eval(t, tab, "stale hidden", chromedp.Evaluate[bool](`document.getElementById("stale").hidden`)))

	srv.CloseClientConnections()
	srv.Close() // the console is gone
	require.NoError(t, chromedp.Do(wait, chromedp.WaitVisible(css(`#stale`))), "the page says it is not refreshed")
	msg := text(t, tab, `#stale`)
	require.Regexp(t, `^Not refreshed since \d\d:\d\d:\d\d UTC: the console does not answer\.`, msg)
}

package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/rebalance"
)

// The console's apply takes a mode, auto unless asked, as `rebalance
// apply --mode` does: on a cluster whose role is not a superuser
// (PostgreSQL 15 lets only superusers subscribe), online is refused by
// the preflight before anything changes, and the apply button's default
// (auto) moves offline. Failed before: the console's apply always ran
// online, and failed there.
func TestConsoleApplyMode(t *testing.T) {
	role := loginRole(t, 1, "managed", false)
	tc := newTestClusterAs(t, role, 1, 2, 4, 3)
	tc.addHost(t, "pg3", 0)
	token := "0123456789abcdef0123456789abcdef"
	base, _ := tc.serve(t, Options{Actions: true, Token: token})
	post := func(body string) (int, string) {
		code, _, out := do(t, http.MethodPost, base+"/api/actions/apply", strings.NewReader(body), token)
		return code, out
	}
	// waitLast waits for the apply in mode to finish (the page's apply
	// starts after the click returns: the one before is not it).
	waitLast := func(mode string) string {
		t.Helper()
		var body string
		require.Eventually(t, func() bool {
			_, _, body = do(t, http.MethodGet, base+"/api/actions/last", nil, "")
			return strings.Contains(body, `"mode": "`+mode+`"`) && strings.Contains(body, `"finished"`)
		}, 10*time.Minute, 200*time.Millisecond, "apply (%s) did not finish within 10 minutes: %s", mode, body)
		return body
	}

	code, body := post(`{"confirm":"apply","mode":"sideways"}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `mode \"sideways\": want auto, online or offline`)

	// Online: refused before anything changes, saying why.
	code, body = post(`{"confirm":"apply","mode":"online"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	body = waitLast("online")
	require.Contains(t, body, "superuser", "the preflight names what online needs: %s", body)
	for _, h := range mustStatus(t, tc).Hosts {
		if h.Name == "pg3" {
			require.Empty(t, h.Shards, "online was refused before anything moved")
		}
	}

	// From the page, the dialog's default: auto, which goes offline.
	tab := browse(t)
	run(t, tab, "moves", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`button.action[data-action=apply]`)),
		chromedp.Click(css(`button.action[data-action=apply]`)), chromedp.WaitVisible(css(`#action-mode`)))
	require.Equal(t, "auto", eval(t, tab, "the mode's default", chromedp.Evaluate[string](`document.getElementById("action-mode").value`)))
	run(t, tab, "apply", chromedp.SendKeys(css(`#action-token`), token), chromedp.SendKeys(css(`#action-confirm`), "apply"),
		chromedp.Click(css(`#action-form button[type=submit]`)))
	body = waitLast("auto")
	require.NotContains(t, body, `"error"`)
	for _, h := range mustStatus(t, tc).Hosts {
		require.NotEmpty(t, h.Shards, "%s holds shards after the console's apply", h.Name)
	}
	code, _, body = get(t, base+"/api/moves?all=1")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"mode": "`+string(rebalance.MoveOffline)+`"`)
	require.NotContains(t, body, `"mode": "`+string(rebalance.MoveOnline)+`"`)
}

package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// With Options.Actions, the moves page offers the actions; each needs
// the token and the confirmation, from the page as from a script.
func TestConsoleActions(t *testing.T) {
	tc := newTestCluster(t, 1, 2, 4, 1)
	tc.addHost(t, "pg3", 0)
	token := "0123456789abcdef0123456789abcdef"
	base, _ := tc.serve(t, Options{Actions: true, Token: token})

	post := func(action, body, token string) (int, string) {
		code, _, out := do(t, http.MethodPost, base+"/api/actions/"+action, strings.NewReader(body), token)
		return code, out
	}
	code, body := post("abort", `{"confirm":"abort"}`, "")
	require.Equal(t, http.StatusForbidden, code, body)
	code, body = post("abort", `{"confirm":"abort"}`, strings.Repeat("0", len(token)))
	require.Equal(t, http.StatusForbidden, code, body)
	code, body = post("abort", `{}`, token)
	require.Equal(t, http.StatusBadRequest, code, "no confirmation: %s", body)
	code, body = post("cleanup", `{"confirm":"abort"}`, token)
	require.Equal(t, http.StatusBadRequest, code, "the wrong confirmation: %s", body)

	// From the page: the dialog asks for both.
	tab := browse(t)
	run(t, tab, "moves", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`button.action[data-action=cleanup]`)),
		chromedp.Click(css(`button.action[data-action=cleanup]`)), chromedp.WaitVisible(css(`#action-dialog`)),
		chromedp.SendKeys(css(`#action-token`), token), chromedp.SendKeys(css(`#action-confirm`), "cleanup"),
		chromedp.Click(css(`#action-form button[type=submit]`)))
	require.Eventually(t, func() bool {
		return strings.Contains(textNow(t, tab, `#action-result`), "cleanup done")
	}, browserWait, 100*time.Millisecond)
	require.NotContains(t, text(t, tab, `#action-result`), "cleanup done:", "no error")

	code, _, body = do(t, http.MethodGet, base+"/api/actions/last", nil, "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"action": "cleanup"`)

	// apply runs on after the answer; the last action follows it.
	code, body = post("apply", `{"confirm":"apply"}`, token)
	require.Equal(t, http.StatusAccepted, code, body)
	require.Eventually(t, func() bool {
		_, _, body = do(t, http.MethodGet, base+"/api/actions/last", nil, "")
		return strings.Contains(body, `"finished"`)
	}, 10*time.Minute, 200*time.Millisecond, "apply did not finish within 10 minutes")
	require.NotContains(t, body, `"error"`)
	for _, h := range mustStatus(t, tc).Hosts {
		require.NotEmpty(t, h.Shards, "%s holds shards after the console's apply", h.Name)
	}
}

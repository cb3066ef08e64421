package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// The map filters shards by number and by state: typed into the form,
// the map follows without a reload (the page's state survives, the URL
// keeps the filter, the refreshes keep it); from the keyboard alone; and
// without JavaScript, as the form's GET. Failed before: the map had no
// filter.
func TestConsoleMapFilter(t *testing.T) {
	tc := newTestCluster(t, 1, 2, 8, 1) // pg1: 0-3, pg2: 4-7
	base, _ := tc.serve(t, Options{Refresh: 300 * time.Millisecond})
	tab := browse(t)
	run(t, tab, "map", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`#host-pg2`)),
		chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	visible := func() string {
		return eval(t, tab, "visible hosts", chromedp.Evaluate[string](
			`Array.from(document.querySelectorAll("table.map tbody tr")).filter(r => !r.hidden && r.offsetParent !== null).map(r => r.dataset.host).join(",")`))
	}
	runs := func() string {
		return eval(t, tab, "runs", chromedp.Evaluate[string](
			`Array.from(document.querySelectorAll("table.map tbody tr:not([hidden]) .run")).map(r => r.dataset.kind + ":" + r.dataset.from + "-" + r.dataset.to).join(",")`))
	}
	require.Equal(t, "pg1,pg2", visible())

	// From the keyboard: the skip link, then Tab to the shards field.
	run(t, tab, "focus the filter", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`),
		chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Tab))
	focused := func() string {
		return eval(t, tab, "focus", chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ""`))
	}
	for i := 0; i < 10 && focused() != "filter-shards"; i++ {
		run(t, tab, "tab", chromedp.KeyEvent(kb.Tab))
	}
	require.Equal(t, "filter-shards", focused(), "the shards field is reached with Tab")
	run(t, tab, "type", chromedp.KeyEvent("5-6"))
	require.Eventually(t, func() bool { return visible() == "pg2" }, browserWait, 100*time.Millisecond, "only pg2 holds 5-6: %s", visible())
	require.Equal(t, "active:5-6", runs())
	require.Contains(t, textNow(t, tab, `#filter-result`), "2 shards match")
	require.Contains(t, eval(t, tab, "url", chromedp.Evaluate[string](`location.search`)), "shards=5-6")
	time.Sleep(time.Second) // several refreshes: they keep the filter
	require.Equal(t, "pg2", visible())
	require.Equal(t, "active:5-6", runs())

	// By state, with the menu from the keyboard: nothing is moving.
	run(t, tab, "clear the shards", chromedp.Evaluate[chromedp.Void](`document.getElementById("filter-shards").value = ""`),
		chromedp.Focus(css(`#filter-state`)), chromedp.SetValue(css(`#filter-state`), "moving"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("filter-state").dispatchEvent(new Event("change", {bubbles: true}))`))
	require.Eventually(t, func() bool { return visible() == "" }, browserWait, 100*time.Millisecond, "no host holds a moving shard: %s", visible())
	require.Contains(t, textNow(t, tab, `#filter-result`), "0 shards match: no shard matches")

	// Bad input is said, and filters nothing.
	run(t, tab, "bad", chromedp.SetValue(css(`#filter-state`), ""), chromedp.SendKeys(css(`#filter-shards`), "9x"))
	require.Eventually(t, func() bool {
		return strings.Contains(textNow(t, tab, `#filter-result`), "Filter not applied") && visible() == "pg1,pg2"
	}, browserWait, 100*time.Millisecond, "bad filter: %s", visible())
	require.True(t, eval(t, tab, "no reload", chromedp.Evaluate[bool](`window.notReloaded === true`)), "the page was reloaded")

	// Without JavaScript: the form's GET.
	code, _, body := get(t, base+"/?shards=1&state=active")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<tr id="host-pg2" data-host="pg2" data-count="4" hidden>`)
	require.Contains(t, body, `data-live="/part/map?shards=1&amp;state=active"`)
	require.Contains(t, body, `<tr data-shard="1"><td><a href="/?shard=1">1</a></td><td>pg1</td><td>active</td></tr>`)
	code, _, body = get(t, base+"/part/map?shards=8")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Filter not applied: shard 8: this cluster&#39;s shards are 0-7")
}

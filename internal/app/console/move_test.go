package console

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// screenshotsEnv, set to 1, makes TestConsoleMoveLive write the map and
// the moves page, a move in progress on both, to docs/img (the README's
// screenshots): SHARDID_SCREENSHOTS=1 go test -run TestConsoleMoveLive ./internal/app/console
const screenshotsEnv = "SHARDID_SCREENSHOTS"

// A rebalance started from the rebalance package (what `shardid rebalance
// apply` runs) shows up on the moves page while it runs, without a
// reload, and the page shows it finished; the map then has the new host's
// shards and the retained old copies, and the journal's JSON has the
// shape of `rebalance status --all --json`.
func TestConsoleMoveLive(t *testing.T) {
	shots := os.Getenv(screenshotsEnv) == "1"
	shards := 12
	if shots {
		shards = 48
	}
	tc := newTestCluster(t, 3, 2, shards, 50)
	tc.addHost(t, "pg3", 2)
	base, _ := tc.serve(t, Options{Refresh: 500 * time.Millisecond})
	tab := browse(t)
	ctx := context.Background()
	run(t, tab, "moves page", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`#no-open`)))

	// Hold the shards' tables on the old hosts in EXCLUSIVE mode: reads
	// go on (the plan, the target's build), the fence waits for them, so
	// the first move stays in progress, at its fence, until the page has
	// shown it.
	release := holdTables(t, tc)
	defer release()

	keep := time.Hour
	done := make(chan error, 1)
	var res *rebalance.ApplyResult
	go func() {
		var err error
		res, err = rebalance.Apply(ctx, tc.c, rebalance.ApplyOptions{Move: rebalance.MoveOptions{
			Mode: rebalance.MoveOffline, Migrations: tc.set, Keep: &keep,
			// The fence retries 30 times: 30 x 10 s for the page to
			// see the move before the held lock fails it.
			LockTimeout: 10 * time.Second,
		}})
		done <- err
	}()

	// The move appears on the open page by itself, building its target
	// or at its fence.
	run(t, tab, "a move in progress", chromedp.WaitVisible(css(`#open-moves tr[data-phase=schema]`)))
	openText := text(t, tab, `#open-moves`)
	require.Contains(t, openText, "→ pg3")
	t.Log("the page shows a move in progress")
	if shots {
		screenshot(t, tab, base, "console-moves.png", "/moves", `#open-moves`)
		screenshot(t, tab, base, "console-map.png", "/", `table.map`)
		run(t, tab, "back to the moves", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`#open-moves`)))
	}
	release()
	t.Log("released the tables")

	// And finishes there.
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Minute):
		t.Fatal("rebalance did not finish within 15 minutes")
	}
	require.NotEmpty(t, res.Moves)
	run(t, tab, "no move left", chromedp.WaitVisible(css(`#no-open`)), chromedp.WaitVisible(css(`#finished-moves`)))
	finished := eval(t, tab, "finished", chromedp.Evaluate[int](`document.querySelectorAll("#finished-moves tbody tr").length`))
	require.Equal(t, len(res.Moves), finished, "every move of the rebalance is listed as finished")
	require.Regexp(t, `\d+(\.\d+)?m?s`, text(t, tab, `#finished-moves tbody tr td:nth-child(7)`), "the refused window of a finished move")

	// The map has pg3's shards and the old copies kept.
	st := mustStatus(t, tc)
	run(t, tab, "map", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`table.map`)))
	counts := eval(t, tab, "count", chromedp.Evaluate[map[string]int](countActive))
	for _, h := range st.Hosts {
		require.Equal(t, len(h.Shards), counts[h.Name], h.Name)
	}
	require.Equal(t, len(res.Moves), counts["pg3"])
	retained := eval(t, tab, "retained", chromedp.Evaluate[int](`document.querySelectorAll(".run.k-retained").length`))
	require.Positive(t, retained, "the moved shards' old copies are shown until cleanup")

	_, _, body := get(t, base+"/api/moves?all=1")
	require.Equal(t, golden(t, "rebalance-status.json.shape"), shapeOf(t, body))
	require.NotContains(t, body, secret)
}

// holdTables locks every shard's likes table on pg1 and pg2 in
// EXCLUSIVE mode (one transaction per host) and returns what releases
// them: a move's fence waits for them, its LockTimeout 30 times.
func holdTables(t *testing.T, tc *testCluster) func() {
	t.Helper()
	ctx := context.Background()
	var holds []pgx.Tx
	st := mustStatus(t, tc)
	for _, h := range st.Hosts {
		if len(h.Shards) == 0 {
			continue
		}
		tx, err := pgtest.Pool(t, tc.hostDSN(t, h.Name)).Begin(ctx)
		require.NoError(t, err)
		var tables []string
		for _, id := range h.Shards {
			tables = append(tables, pgx.Identifier{st.Shards[id].Schema, "likes"}.Sanitize())
		}
		_, err = tx.Exec(ctx, `LOCK TABLE `+strings.Join(tables, ", ")+` IN EXCLUSIVE MODE`)
		require.NoError(t, err)
		holds = append(holds, tx)
	}
	return func() {
		for _, tx := range holds {
			tx.Rollback(ctx)
		}
		holds = nil
	}
}

// A move stopped by an error shows on the moves page with the error and
// the ways out (resume with apply, roll back with abort); aborted, it
// leaves the moves in progress.
func TestConsoleMoveStopped(t *testing.T) {
	tc := newTestCluster(t, 3, 2, 4, 5)
	tc.addHost(t, "pg3", 2)
	base, _ := tc.serve(t, Options{Refresh: 500 * time.Millisecond})
	tab := browse(t)
	ctx := context.Background()
	run(t, tab, "moves page", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`#no-open`)))

	release := holdTables(t, tc)
	defer release()
	_, err := rebalance.Apply(ctx, tc.c, rebalance.ApplyOptions{Move: rebalance.MoveOptions{
		Mode: rebalance.MoveOffline, Migrations: tc.set, LockTimeout: 20 * time.Millisecond,
	}})
	require.Error(t, err, "the fence could not go up")
	release()

	run(t, tab, "a stopped move", chromedp.WaitVisible(css(`#open-moves .badge.bad`)))
	row := text(t, tab, `#open-moves tbody tr`)
	require.Contains(t, row, "STOPPED")
	require.Contains(t, row, "Resume: shardid rebalance apply --config "+tc.path)
	require.Regexp(t, `roll back: shardid rebalance abort --config \S+ --shard \d+`, row)

	// On a phone (390 px wide) the progress and status stay on screen,
	// and so do the map's strips.
	require.NoError(t, chromedp.Do(tab, chromedp.EmulateViewport(390, 844)))
	run(t, tab, "moves on a phone", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`#open-moves .badge.bad`)))
	onScreen := `(() => { const out = [];
		for (const el of document.querySelectorAll(SEL)) { const r = el.getBoundingClientRect(); if (r.right > 391 || r.left < 0 || r.width < 40) out.push(el.className + " " + r.left + ".." + r.right); }
		if (document.documentElement.scrollWidth > 391) {
			out.push("page " + document.documentElement.scrollWidth + " wide");
			for (const el of document.querySelectorAll("body *")) { const r = el.getBoundingClientRect(); if ((r.right + window.scrollX > 391 || el.scrollWidth > el.clientWidth + 1) && out.length < 8) out.push(el.tagName + "#" + el.id + "." + el.className + " to " + (r.right + window.scrollX) + " sw " + el.scrollWidth + "/" + el.clientWidth); }
		}
		return out; })()`
	off := eval(t, tab, "moves cells", chromedp.Evaluate[[]string](strings.Replace(onScreen, "SEL", `"#open-moves td"`, 1)))
	require.Empty(t, off, "off-screen at 390 px")
	run(t, tab, "map on a phone", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`table.map`)))
	off = eval(t, tab, "strips", chromedp.Evaluate[[]string](strings.Replace(onScreen, "SEL", `".strip"`, 1)))
	require.Empty(t, off, "off-screen at 390 px")
	run(t, tab, "back to the moves", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`#open-moves .badge.bad`)))

	aborted, err := rebalance.AbortMove(ctx, tc.c, nil)
	require.NoError(t, err)
	require.NotEmpty(t, aborted)
	run(t, tab, "aborted", chromedp.WaitVisible(css(`#no-open`)), chromedp.WaitVisible(css(`#finished-moves tr[data-phase=aborted]`)))
}

func mustStatus(t *testing.T, tc *testCluster) *install.Status {
	t.Helper()
	st, err := install.ClusterStatus(context.Background(), tc.c)
	require.NoError(t, err)
	return st
}

// screenshot navigates to path, clicks a shard on the map, and writes a
// PNG of the page to docs/img/name.
func screenshot(t *testing.T, tab context.Context, base, name, path, wait string) {
	t.Helper()
	run(t, tab, name, chromedp.Navigate(base+path), chromedp.WaitVisible(css(wait)))
	if path == "/" {
		run(t, tab, "a shard", chromedp.Click(css(`tr:last-child .run.k-incoming, tr:first-child .run.k-moving, .run.k-active`)),
			chromedp.WaitVisible(css(`#shard-detail dl`)))
	}
	png := eval(t, tab, name, chromedp.FullScreenshot(100))
	dir := filepath.Join("..", "..", "..", "docs", "img")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
}

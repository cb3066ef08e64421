package console

import (
	"context"
	"os"
	"path/filepath"
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

	keep := time.Hour
	done := make(chan error, 1)
	var res *rebalance.ApplyResult
	go func() {
		var err error
		res, err = rebalance.Apply(ctx, tc.c, rebalance.ApplyOptions{Move: rebalance.MoveOptions{
			Mode: rebalance.MoveOffline, Migrations: tc.set, Keep: &keep,
			// The fence retries 30 times: 30 x 10 s for the page to
			// see a move before a held lock fails it.
			LockTimeout: 10 * time.Second,
		}})
		done <- err
	}()

	// Once apply has journaled its moves, hold the tables of the shards
	// it moves on their old hosts: a move waits for them (reading the
	// shard's size, or at its fence), so that moves stay in progress
	// until the page has shown them. The first may be past that already.
	var open []*rebalance.MoveRecord
	require.Eventually(t, func() bool {
		var err error
		open, err = rebalance.Moves(ctx, tc.c, false)
		return err == nil && len(open) > 0
	}, 5*time.Minute, 10*time.Millisecond, "apply journaled no move within 5 minutes")
	t.Logf("apply journaled %d moves", len(open))
	// One transaction per old host (a pool has few connections), a
	// savepoint per table: a table whose move got there first is skipped.
	var holds []pgx.Tx
	held := 0
	txs := map[string]pgx.Tx{}
	for _, mv := range open {
		tx, ok := txs[mv.From]
		if !ok {
			var err error
			tx, err = pgtest.Pool(t, tc.hostDSN(t, mv.From)).Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '1min'`)
			require.NoError(t, err)
			txs[mv.From] = tx
			holds = append(holds, tx)
		}
		_, err := tx.Exec(ctx, `SAVEPOINT hold`)
		require.NoError(t, err)
		if _, err = tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{mv.Schema, "likes"}.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			_, err = tx.Exec(ctx, `ROLLBACK TO SAVEPOINT hold`) // that move got there first
			require.NoError(t, err)
			continue
		}
		held++
	}
	release := func() {
		for _, tx := range holds {
			tx.Rollback(ctx)
		}
		holds = nil
	}
	defer release()
	t.Logf("holding %d of their tables", held)

	// The move appears on the open page by itself.
	run(t, tab, "a move in progress", chromedp.WaitVisible(css(`#open-moves tr[data-shard]`)))
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

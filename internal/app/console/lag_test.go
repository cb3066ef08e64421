package console

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// An online move held in catch-up (its catch-up timed out at once: it
// stops with its slot kept on the source for a resume) shows on the moves
// page its replication lag, read live on the source: the bytes of WAL the
// target has not confirmed, which grow as the source writes.
func TestConsoleMoveLag(t *testing.T) {
	tc := newTestCluster(t, 3, 2, 4, 5)
	tc.addHost(t, "pg3", 2)
	base, _ := tc.serve(t, Options{Refresh: 500 * time.Millisecond})
	tab := browse(t)
	ctx := context.Background()

	shard := mustStatus(t, tc).Hosts[0].Shards[0]
	_, err := rebalance.MoveShard(ctx, tc.c, shard, "pg3", rebalance.MoveOptions{
		Mode: rebalance.MoveOnline, Migrations: tc.set, CatchupTimeout: time.Nanosecond, CatchupDelay: time.Nanosecond,
	})
	require.ErrorIs(t, err, rebalance.ErrCatchupTimeout)
	recs, err := rebalance.Moves(ctx, tc.c, false)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.True(t, recs[0].Replicating(), "the move stopped in an online catch-up phase (%s)", recs[0].Phase)

	// The source writes on: the target (its subscription disabled, its
	// worker gone: DISABLE does not wait for it) falls behind by at least
	// that much.
	before, err := rebalance.MoveLag(ctx, tc.c, recs[0], time.Minute)
	require.NoError(t, err)
	src := pgtest.Pool(t, tc.hostDSN(t, recs[0].From))
	require.Eventually(t, func() bool {
		var active bool
		return src.QueryRow(ctx, `SELECT active FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, before.Slot).Scan(&active) == nil && !active
	}, 5*time.Minute, 100*time.Millisecond, "the stopped move's apply worker leaves the slot")
	// Transactional: its commit writes (and flushes) the WAL, which
	// pg_current_wal_lsn() counts.
	_, err = src.Exec(ctx, `SELECT pg_catalog.pg_logical_emit_message(true, 'shardid-test', repeat('x', 100000))`)
	require.NoError(t, err)

	lag, err := rebalance.MoveLag(ctx, tc.c, recs[0], time.Minute)
	require.NoError(t, err)
	require.GreaterOrEqual(t, lag.Bytes, int64(100000), "the WAL the target has not confirmed")

	run(t, tab, "moves page", chromedp.Navigate(base+"/moves"), chromedp.WaitVisible(css(`#open-moves .lag-bytes`)))
	row := text(t, tab, `#open-moves tbody tr`)
	require.Regexp(t, `lag: \d+(\.\d)? (B|KiB|MiB) behind`, row)
	n := eval(t, tab, "lag bytes", chromedp.Evaluate[string](`document.querySelector("#open-moves .lag-bytes").dataset.bytes`))
	b, err := strconv.ParseInt(n, 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, b, int64(100000), "the page's lag is the source's, read live")

	// Aborted, the move and its lag leave the page.
	_, err = rebalance.AbortMove(ctx, tc.c, nil)
	require.NoError(t, err)
	run(t, tab, "aborted", chromedp.WaitVisible(css(`#no-open`)))
}

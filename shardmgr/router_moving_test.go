package shardmgr_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	shcatalog "github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// A router that holds a shard as moving asks the catalog again, while
// writes go to that shard, every shardmgr.MovingRefresh, whatever its
// refresh interval: a writer retrying a refused write gets through soon
// after the catalog sets the shard active again (the flip, or a move's
// give-back), not at the router's next refresh. The router here refreshes
// once an hour, so a writer that gets through at all within the test's
// bound got through by those checks; the delays are logged (the figures
// with the default 1 s refresh, quiet and loaded, are in
// docs/benchmarks.md). The catalog checks stay bounded while the shard is
// moving, and stop once none is. Failed before: the writer was refused
// until the next refresh (about 1 s with the default interval; here an
// hour). A bound on the delay itself failed under a load of 70-80.
func TestRouterSeesTheFlipSoon(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	catalog := pool(t, cfg.Catalog)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(time.Hour))
	const shard = 2
	nop := func(context.Context, pgx.Tx, shardmgr.Shard) error { return nil }

	var lastOK atomic.Int64 // unix nanoseconds of the writer's last accepted write
	var refusals atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := r.Tx(ctx(t), shard, nop); err != nil {
				refusals.Add(1)
				time.Sleep(2 * time.Millisecond)
				continue
			}
			lastOK.Store(time.Now().UnixNano())
		}
	})
	defer func() { close(stop); wg.Wait() }()

	const flips = 7
	var seen []time.Duration
	for range flips {
		_, err := shcatalog.SetShardState(ctx(t), catalog, shard, shardmgr.StateMoving, 0)
		require.NoError(t, err)
		_, err = r.Reload(ctx(t))
		require.NoError(t, err)
		before := refusals.Load()
		require.Eventually(t, func() bool { return refusals.Load() > before }, time.Minute, time.Millisecond, "the writer is refused while the shard is moving")
		_, err = shcatalog.SetShardState(ctx(t), catalog, shard, shardmgr.StateActive, 0)
		require.NoError(t, err)
		flipped := time.Now()
		require.Eventually(t, func() bool { return lastOK.Load() > flipped.UnixNano() }, time.Minute, time.Millisecond, "the writer got through before the router's next refresh (an hour away)")
		seen = append(seen, time.Unix(0, lastOK.Load()).Sub(flipped))
	}
	slices.Sort(seen)
	t.Logf("writes accepted after the flip within: median %s, all %v (refresh interval 1h, moving refresh %s)", seen[flips/2], seen, shardmgr.MovingRefresh)

	// Bounded: a shard held as moving for a second costs about a check per
	// MovingRefresh however fast the writer tries; none moving, the checks
	// stop (the next refresh is an hour away).
	_, err := shcatalog.SetShardState(ctx(t), catalog, shard, shardmgr.StateMoving, 0)
	require.NoError(t, err)
	_, err = r.Reload(ctx(t))
	require.NoError(t, err)
	c0 := shardmgr.CatalogChecks(r)
	time.Sleep(time.Second)
	moving := shardmgr.CatalogChecks(r) - c0
	_, err = shcatalog.SetShardState(ctx(t), catalog, shard, shardmgr.StateActive, 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.Map().Shards[shard].State == shardmgr.StateActive }, time.Minute, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	c1 := shardmgr.CatalogChecks(r)
	time.Sleep(2 * time.Second)
	active := shardmgr.CatalogChecks(r) - c1
	t.Logf("catalog checks: %d in a second with the shard moving, %d in two seconds with none", moving, active)
	require.LessOrEqual(t, moving, int64(time.Second/shardmgr.MovingRefresh)+2)
	require.LessOrEqual(t, active, int64(1))
}

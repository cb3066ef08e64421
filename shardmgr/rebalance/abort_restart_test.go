package rebalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A move whose source stops right after its fence fails naming the source
// (the server whose connection failed), not the target's log; left fenced
// (its give-back bounded to a nanosecond here, so that it runs out at
// once), it is aborted while the source is still down: the abort waits for
// the source, which the test starts again once the abort logs that it
// waits, and gives the shard back with every row. Failed before: the
// error read "wait for the target to apply every change made before the
// fence: failed to connect ... (the target server's log says why)", and
// the abort failed at once, the shard left moving and fenced.
func TestAbortWaitsForASourceThatRestarted(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg, s := workerCluster(t, 3, map[string]string{"wal_retrieve_retry_interval": "100ms"})
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	const shard = 0
	home := clustertest.ClusterMap(t, cfg).Shards[shard].Host
	routeLikes(t, r, shard, 40)
	_, err := MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)})
	require.NoError(t, err)
	want := likeIDs(t, cfg, shard)

	// The move back stops its source, pg4, once fenced.
	opts := MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)}
	opts.giveBackRetry = time.Nanosecond
	halted := false
	opts.afterFence = func(int) {
		require.NoError(t, s.Halt())
		halted = true
	}
	_, err = MoveShard(ctx, clustertest.Handle(t, cfg), shard, home, opts)
	require.True(t, halted, "the move reached its fence")
	require.ErrorIs(t, err, ErrSourceFenced)
	require.ErrorContains(t, err, "wait for the target to apply every change made before the fence: source pg4: ")
	require.NotContains(t, err.Error(), "the target server's log says why")
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, shardmgr.StateMoving, m.Shards[shard].State)

	// Aborted while pg4 is down; started again once the abort waits.
	logger, waiting := watchLogger(t, giveBackWaitsMsg)
	returned := restartWhenWaiting(ctx, s, waiting)
	c, err := cluster.Open(ctx, cfg, cluster.WithLogger(logger))
	require.NoError(t, err)
	res, err := AbortMove(ctx, c, []int{shard})
	c.Close()
	require.NoError(t, returned())
	require.NoError(t, err)
	require.Len(t, res, 1)

	clustertest.Reopen(t, cfg)
	m = clustertest.ClusterMap(t, cfg)
	require.Equal(t, shardmgr.StateActive, m.Shards[shard].State)
	require.Equal(t, "pg4", m.Shards[shard].Host)
	r2 := openRouter(t, cfg)
	routeLikes(t, r2, shard, 1)
	got := likeIDs(t, cfg, shard)
	require.Len(t, got, len(want)+1)
	require.Subset(t, got, want, "every row the shard held before the move")
	requireVerifyOK(t, cfg)
}

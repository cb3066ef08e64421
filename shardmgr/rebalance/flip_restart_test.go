package rebalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A target (the shard's new home) stopped between the flip's catalog
// commit and its opening, and started again once the move logs that it
// waits for it, is opened before the move returns: the shard takes writes
// on its new home, and running the move again finishes it with every row.
// Failed before: the failed move tried to open the target once, gave up
// ("... whose copy still refuses writes until the move is run again"), and
// the shard refused writes on both copies.
func TestFlipOpensATargetThatRestarted(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg, s := workerCluster(t, 3, map[string]string{"wal_retrieve_retry_interval": "100ms"})
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	const shard = 0
	routeLikes(t, r, shard, 40)
	want := likeIDs(t, cfg, shard)

	logger, waiting := watchLogger(t, openWaitsMsg)
	opts := MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration), Logger: logger}
	halted := false
	opts.afterFlip = func() {
		require.NoError(t, s.Halt())
		halted = true
	}
	// Started again once the move waits for it, or, when nothing waits,
	// once the move has returned.
	returned := restartWhenWaiting(ctx, s, waiting)
	c, err := cluster.Open(ctx, cfg)
	require.NoError(t, err)
	_, err = MoveShard(ctx, c, shard, "pg4", opts)
	c.Close()
	require.NoError(t, returned())
	require.True(t, halted, "the move flipped")
	require.Error(t, err, "the flip's opening failed")
	require.NotContains(t, err.Error(), "still refuses writes")

	// The shard serves on pg4, and takes writes there.
	clustertest.Reopen(t, cfg)
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, "pg4", m.Shards[shard].Host)
	r2 := openRouter(t, cfg)
	routeLikes(t, r2, shard, 1)

	// The next run finishes the move, every row with it.
	_, err = MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)})
	require.NoError(t, err)
	got := likeIDs(t, cfg, shard)
	require.Len(t, got, len(want)+1)
	require.Subset(t, got, want, "every row the shard held before the move")
	requireVerifyOK(t, cfg)
}

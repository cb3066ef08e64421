package rebalance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// localShard is host's own record of shard (nil when it has none).
func localShard(t *testing.T, cfg *shardmgr.Config, host string, shard int) *shardmgr.LocalShard {
	t.Helper()
	rows, err := shardmgr.ReadLocalShards(clustertest.Ctx(t), clustertest.HostPool(t, cfg, host))
	require.NoError(t, err)
	for _, l := range rows {
		if l.Shard == shard {
			return &l
		}
	}
	return nil
}

// hostRecords reads every host's record, for shardmgr.CompareHostRecords.
func hostRecords(t *testing.T, cfg *shardmgr.Config) map[string][]shardmgr.LocalShard {
	t.Helper()
	out := map[string][]shardmgr.LocalShard{}
	for _, h := range cfg.Hosts {
		rows, err := shardmgr.ReadLocalShards(clustertest.Ctx(t), clustertest.HostPool(t, cfg, h.Name))
		require.NoError(t, err)
		out[h.Name] = rows
	}
	return out
}

// Each step that makes a shard live on a host records there the
// generation the catalog committed it at, so that a catalog restored from
// before the step is seen to be older than the hosts: the target once
// the flip opened it (before any cleanup), the source when an abort or a
// failed cut-over gives it back, and the retired copy's record goes with
// the cleanup. At every point the records agree with the live catalog.
func TestMoveRecordsGenerationOnHosts(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := moveCluster(t, 6)

	// A move stopped right after the target opened: no cleanup yet.
	opts := MoveOptions{Migrations: sampleSet(t)}
	opts.crashAt = crashTargetOpened
	_, err := MoveShard(ctx, clustertest.Handle(t, cfg), 0, "pg4", opts)
	require.ErrorIs(t, err, errCrashed)
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, "pg4", m.Shards[0].Host)
	flip := m.Generation
	got := localShard(t, cfg, "pg4", 0)
	require.NotNil(t, got)
	require.Equal(t, [2]any{"active", flip}, [2]any{got.State, got.Generation}, "the opened target records the flip's generation")
	require.Nil(t, shardmgr.CompareHostRecords(m, hostRecords(t, cfg)))

	// Finished: the source's record goes with its copy.
	_, err = MoveShard(ctx, clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Nil(t, localShard(t, cfg, "pg1", 0))
	require.Equal(t, flip, localShard(t, cfg, "pg4", 0).Generation)
	require.Nil(t, shardmgr.CompareHostRecords(clustertest.ClusterMap(t, cfg), hostRecords(t, cfg)))

	// An abort gives the source back at the abort's generation.
	stopped := MoveOptions{Migrations: sampleSet(t)}
	stopped.stopAfter = PhaseFenced
	_, err = MoveShard(ctx, clustertest.Handle(t, cfg), 1, "pg4", stopped)
	require.ErrorIs(t, err, errStopped)
	_, err = AbortMove(ctx, clustertest.Handle(t, cfg), []int{1})
	require.NoError(t, err)
	m = clustertest.ClusterMap(t, cfg)
	require.Equal(t, "pg1", m.Shards[1].Host)
	got = localShard(t, cfg, "pg1", 1)
	require.Equal(t, [2]any{"active", m.Generation}, [2]any{got.State, got.Generation}, "the source given back records the abort's generation")
	require.Nil(t, localShard(t, cfg, "pg4", 1), "the target's incoming copy is forgotten")
	require.Nil(t, shardmgr.CompareHostRecords(m, hostRecords(t, cfg)))
}

package rebalance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// applyBounded runs Apply with --parallel 4, bounded by limit: a hang is a
// failure, not a stuck test.
func applyBounded(t *testing.T, cfg *shardmgr.Config, limit time.Duration) (*ApplyResult, error) {
	return applyParallel(t, cfg, 4, limit)
}

func applyParallel(t *testing.T, cfg *shardmgr.Config, parallel int, limit time.Duration) (*ApplyResult, error) {
	t.Helper()
	c, cancel := context.WithTimeout(clustertest.Ctx(t), limit)
	defer cancel()
	return Apply(c, clustertest.Handle(t, cfg), ApplyOptions{Parallel: parallel, Move: MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)}})
}

// requireApplied checks that every move of res finished, left no
// replication objects behind, kept every row, and that verify passes.
func requireApplied(t *testing.T, cfg *shardmgr.Config, res *ApplyResult, want map[int][]int64) {
	t.Helper()
	var names []string
	for _, m := range res.Moves {
		require.Equal(t, PhaseCleaned, m.Phase)
		rec := moveRecord(t, cfg, m.ID)
		require.Empty(t, rec.Error)
		names = append(names, rec.replName)
	}
	require.Zero(t, replicationLeftovers(t, cfg, names...))
	for shard, ids := range want {
		require.Equal(t, ids, likeIDs(t, cfg, shard), "shard %d", shard)
	}
	require.Zero(t, subscriptionsEnabled(t, cfg, "pg4"))
	requireVerifyOK(t, cfg)
}

// A target with one logical replication worker and apply --parallel 4:
// the moves go in batches, one source's at a time, and all finish.
func TestApplyParallelOnOneWorkerTarget(t *testing.T) {
	t.Parallel()
	cfg, _ := workerCluster(t, 16, map[string]string{"max_logical_replication_workers": "1", "wal_retrieve_retry_interval": "100ms"})
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	want := map[int][]int64{}
	for s := range 16 {
		routeLikes(t, r, s, 20)
		want[s] = likeIDs(t, cfg, s)
	}
	res, err := applyBounded(t, cfg, 3*time.Minute)
	require.NoError(t, err)
	require.Len(t, res.Moves, 4)
	requireApplied(t, cfg, res, want)
}

// The moves of one apply to one target start their subscriptions in one
// pass of the target's launcher: with a minute's pause between its passes
// (wal_retrieve_retry_interval), moves that each waited for a pass of
// their own would run into WorkerStartTimeout.
func TestApplyPaysLauncherPauseOnce(t *testing.T) {
	t.Parallel()
	cfg, _ := workerCluster(t, 16, map[string]string{"wal_retrieve_retry_interval": "1min"})
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	want := map[int][]int64{}
	for s := range 16 {
		routeLikes(t, r, s, 20)
		want[s] = likeIDs(t, cfg, s)
	}
	res, err := applyBounded(t, cfg, 50*time.Second)
	require.NoError(t, err)
	require.Len(t, res.Moves, 4)
	requireApplied(t, cfg, res, want)
}

// A batch's replication outlives its first moves: each move's cleanup
// takes only its own tables out of the batch's publication, and the last
// one drops the batch's subscription, slot and publication: whether the
// moves of a batch (two per source here) finish one after another
// (--parallel 1) or at once (--parallel 6, their cleanups racing).
func TestApplyBatchOutlivesItsFirstMoves(t *testing.T) {
	t.Parallel()
	for _, parallel := range []int{1, 6} {
		cfg, _ := workerCluster(t, 24, map[string]string{"wal_retrieve_retry_interval": "100ms"})
		r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
		want := map[int][]int64{}
		for s := range 24 {
			routeLikes(t, r, s, 10)
			want[s] = likeIDs(t, cfg, s)
		}
		res, err := applyParallel(t, cfg, parallel, 3*time.Minute)
		require.NoError(t, err, "--parallel %d", parallel)
		require.Len(t, res.Moves, 6)
		requireApplied(t, cfg, res, want)
	}
}

package rebalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

// An online move copies the rows itself at the slot's snapshot, so its
// subscription needs one worker, never a table sync worker: it finishes
// on a target with a single logical replication worker while writers
// insert into the shard throughout, keeps every row, and the target ends
// with the source's primary key and secondary index (dropped for the
// copy, built after).
func TestMoveCopiesAtSnapshotWithOneWorker(t *testing.T) {
	t.Parallel()
	cfg, _ := workerCluster(t, 3, map[string]string{"max_logical_replication_workers": "1", "wal_retrieve_retry_interval": "100ms"})
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, 0, 20_000)
	indexes := func(host string) []indexDef {
		defs, err := deferredIndexes(ctx(t), hostPool(t, cfg, host), "shard_0000", []string{"likes"})
		require.NoError(t, err)
		return defs
	}
	want := indexes("pg1")
	require.Len(t, want, 2, "the sample migrations' likes_pkey and likes_post_id_idx")

	stop := make(chan struct{})
	w, wg := runWriters(t, r, []int{0}, 2, stop)
	res, err := MoveShard(ctx(t), cfg, 0, "pg4", MoveOptions{Migrations: sampleSet(t), CatchupTimeout: 40 * time.Second, Keep: new(time.Duration)})
	time.Sleep(100 * time.Millisecond) // writes after the flip, on the target
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Empty(t, w.failures)
	require.Empty(t, w.dups)
	require.Positive(t, w.rows[0])
	require.GreaterOrEqual(t, res.Rows, int64(20_000))
	require.Equal(t, "pg4", clusterMap(t, cfg).Shards[0].Host)
	require.Len(t, likeIDs(t, cfg, 0), 20_000+w.rows[0])
	require.Equal(t, want, indexes("pg4"))
	requireVerifyOK(t, cfg)
}

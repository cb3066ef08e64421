package rebalance

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
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
		defs, err := deferredIndexes(clustertest.Ctx(t), clustertest.HostPool(t, cfg, host), "shard_0000", []string{"likes"})
		require.NoError(t, err)
		return defs
	}
	want := indexes("pg1")
	require.Len(t, want, 2, "the sample migrations' likes_pkey and likes_post_id_idx")

	stop := make(chan struct{})
	w, wg := runWriters(t, r, []int{0}, 2, stop)
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t), CatchupTimeout: 40 * time.Second, Keep: new(time.Duration)})
	time.Sleep(100 * time.Millisecond) // writes after the flip, on the target
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Empty(t, w.failures)
	require.Empty(t, w.dups)
	require.Positive(t, w.rows[0])
	require.GreaterOrEqual(t, res.Rows, int64(20_000))
	require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[0].Host)
	require.Len(t, likeIDs(t, cfg, 0), 20_000+w.rows[0])
	require.Equal(t, want, indexes("pg4"))
	requireVerifyOK(t, cfg)
}

// A big table with a one-column integer key is copied in ranges of that
// key, each a COPY at the slot's snapshot; the ranges are disjoint and
// cover every row, and the move keeps every row and id under writes.
func TestMoveCopiesBigTablesInRanges(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, 0, 20_000)
	home := clustertest.ClusterMap(t, cfg).Shards[0].Host
	src := clustertest.HostPool(t, cfg, home)
	_, err = src.Exec(clustertest.Ctx(t), `ANALYZE shard_0000.likes`)
	require.NoError(t, err)

	ranges, err := copyRangesOf(clustertest.Ctx(t), src, "shard_0000", "likes", 1)
	require.NoError(t, err)
	require.Len(t, ranges, copyRanges)
	var sum int64
	for _, where := range ranges {
		var n int64
		require.NoError(t, src.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM shard_0000.likes WHERE `+where).Scan(&n))
		require.Positive(t, n, where)
		sum += n
	}
	require.EqualValues(t, 20_000, sum, "the ranges cover every row once")
	small, err := copyRangesOf(clustertest.Ctx(t), src, "shard_0000", "likes", rangeCopyMinBytes)
	require.NoError(t, err)
	require.Nil(t, small, "a small table is one COPY")

	to := "pg3"
	if home == to {
		to = "pg2"
	}
	before := likeIDs(t, cfg, 0)
	stop := make(chan struct{})
	w, wg := runWriters(t, r, []int{0}, 2, stop)
	log := &benchLines{}
	opts := MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration), Logger: log.logger()}
	opts.rangeCopyMinBytes = 1
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, to, opts)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Empty(t, w.failures)
	require.Empty(t, w.dups)
	after := likeIDs(t, cfg, 0)
	require.Len(t, after, len(before)+w.rows[0])
	require.Subset(t, after, before)
	requireVerifyOK(t, cfg)
	log.mu.Lock()
	defer log.mu.Unlock()
	require.True(t, slices.ContainsFunc(log.lines, func(l string) bool {
		return strings.Contains(l, "copied at the slot's snapshot") && strings.Contains(l, fmt.Sprintf("pieces=%d", copyRanges))
	}), "the move copied the table in %d ranges: %v", copyRanges, log.lines)
}

// A slot's exported snapshot read back with its xmin past its xmax (seen
// under load: "4261:4258:", which pg_snapshot's input refused and failed
// the move) is the snapshot the server's visibility tests make of it:
// everything below xmin finished, nothing from xmin on.
func TestOrderedSnapshot(t *testing.T) {
	for in, want := range map[string]string{
		"4261:4258:":          "4261:4261:",
		"4258:4261:4259":      "4258:4261:4259",
		"100:100:":            "100:100:",
		"9000000000:1:5":      "9000000000:9000000000:",
		"4258:4262:4259,4260": "4258:4262:4259,4260",
	} {
		got, err := orderedSnapshot(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:b:"} {
		_, err := orderedSnapshot(bad)
		require.Error(t, err, bad)
	}
}

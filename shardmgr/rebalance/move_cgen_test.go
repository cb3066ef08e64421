package rebalance

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
	shsql "github.com/shardid/shardid/sql"
)

// A cluster on the C generator (generator: c) moves a shard online under
// continuous writes and back offline: the target gets the C generator too,
// the counter is carried past every id the source drew (here hours ahead
// of the clock), no id repeats, no row is lost, and verify passes naming
// the C generator on every shard.
func TestMoveWithTheCGenerator(t *testing.T) {
	t.Parallel()
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	cfg := moveCluster(t, 6)
	cfg.Generator = shsql.GeneratorC
	applyHosts(t, cfg)
	m := clustertest.ClusterMap(t, cfg)
	src := clustertest.HostPool(t, cfg, m.Shards[2].Host)
	ahead := shardschema.IDOfCounter(m.Layout, (time.Now().Add(3*time.Hour).UnixMilli()-m.Layout.Epoch)<<m.Layout.Resolved().SeqBits, 2)
	_, err := src.Exec(clustertest.Ctx(t), `SELECT shard_0002.next_id_advance($1, force => true)`, ahead)
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, 2, 2000)
	before := likeIDs(t, cfg, 2)
	require.Greater(t, before[0], ahead)
	var drawn int64 // drawn from the source's counter and never stored
	require.NoError(t, src.QueryRow(clustertest.Ctx(t), `SELECT shard_0002.next_id()`).Scan(&drawn))

	stop := make(chan struct{})
	w, wg := runWriters(t, r, []int{2, 2, 3}, 6, stop)
	time.Sleep(300 * time.Millisecond)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 2, "pg4", MoveOptions{Migrations: sampleSet(t)})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Empty(t, w.failures, "writers saw only the typed refusal")
	require.Empty(t, w.dups, "no id repeated")
	got := likeIDs(t, cfg, 2)
	want := append([]int64(nil), before...)
	for id, s := range w.ids {
		if s == 2 {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	require.Equal(t, want, got, "every committed row is on the new host")
	for _, id := range got[len(before):] {
		require.Greater(t, id, drawn)
	}

	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 2, "pg1", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	routeLikes(t, r, 2, 100)
	after := likeIDs(t, cfg, 2)
	require.Len(t, after, len(got)+100)
	require.Greater(t, after[len(got)], got[len(got)-1], "the second move carried the counter too")

	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{Deep: true})
	require.NoError(t, err)
	for _, p := range rep.Problems {
		require.Equal(t, verify.CheckGeneratorID, p.Check, "%v", p) // ids hours ahead: a note, not a problem
	}
	require.True(t, rep.OK, "%v", rep.Problems)
	require.Equal(t, []verify.GeneratorCount{{Kind: shsql.GeneratorC, Count: 6, Shards: "0-5"}}, rep.Generators)
}

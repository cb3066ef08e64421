package rebalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

func hostCounts(m *shardmgr.ShardMap) map[string]int {
	out := map[string]int{}
	for _, s := range m.Shards {
		out[s.Host]++
	}
	return out
}

// The README's flow in Go: add a host to the cluster file, plan, apply
// (interrupted, then resumed), then drain a host.
func TestRebalanceAddHostThenDrain(t *testing.T) {
	t.Parallel()
	cfg := moveClusterFileOnly(t, 12)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	rows := map[int]int{}
	for s := range 12 {
		routeLikes(t, r, s, 20+s)
		rows[s] = 20 + s
	}
	before := clustertest.ClusterMap(t, cfg)

	// Planning changes nothing, and says the same twice.
	plan, err := PlanRebalance(clustertest.Ctx(t), clustertest.Handle(t, cfg), PlanOptions{})
	require.NoError(t, err)
	require.Len(t, plan.Moves, 3)
	for _, mv := range plan.Moves {
		require.Equal(t, "pg4", mv.To)
		require.Positive(t, mv.Bytes)
	}
	again, err := PlanRebalance(clustertest.Ctx(t), clustertest.Handle(t, cfg), PlanOptions{})
	require.NoError(t, err)
	require.Equal(t, plan.Moves, again.Moves)
	bySize, err := PlanRebalance(clustertest.Ctx(t), clustertest.Handle(t, cfg), PlanOptions{By: BySize})
	require.NoError(t, err)
	require.NotEmpty(t, bySize.Moves)
	for _, mv := range bySize.Moves {
		require.Equal(t, "pg4", mv.To)
	}
	after := clustertest.ClusterMap(t, cfg)
	require.Equal(t, before.Generation, after.Generation)
	_, known := after.Host("pg4")
	require.False(t, known, "planning registers nothing")

	// Nor does apply: the catalog is where hosts are; the file's new host
	// is applied by init, the one step that writes hosts.
	_, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Move: MoveOptions{Migrations: sampleSet(t)}})
	require.ErrorIs(t, err, ErrHostsNotApplied)
	require.ErrorContains(t, err, "host pg4 is not in the catalog")
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, ErrHostsNotApplied)
	after = clustertest.ClusterMap(t, cfg)
	require.Equal(t, before.Generation, after.Generation, "nothing changed")
	_, known = after.Host("pg4")
	require.False(t, known)
	applyHosts(t, cfg)

	// Apply, interrupted with the moves fenced: writes to them are refused
	// until the next apply resumes them.
	opts := ApplyOptions{Parallel: 2, Move: MoveOptions{Migrations: sampleSet(t)}}
	opts.Move.stopAfter = PhaseFenced
	res, err := Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), opts)
	var me *shardmgr.ShardErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me.Errs, 3)
	require.Len(t, res.Moves, 3)
	for _, mv := range res.Moves {
		require.Equal(t, PhaseFenced, mv.Phase)
		require.ErrorIs(t, r.Tx(clustertest.Ctx(t), mv.Shard, nil), shardmgr.ErrShardMoving)
	}
	opts.Move.stopAfter = ""
	res, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), opts)
	require.NoError(t, err)
	require.Equal(t, 3, res.Resumed)
	require.Len(t, res.Moves, 3)
	for _, mv := range res.Moves {
		require.Equal(t, PhaseCleaned, mv.Phase)
		require.Equal(t, "pg4", mv.To)
	}
	require.Equal(t, map[string]int{"pg1": 3, "pg2": 3, "pg3": 3, "pg4": 3}, hostCounts(clustertest.ClusterMap(t, cfg)))
	for s, n := range rows {
		require.Len(t, likeIDs(t, cfg, s), n, "shard %d", s)
	}
	requireVerifyOK(t, cfg)

	// Balanced: nothing to do.
	res, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), opts)
	require.NoError(t, err)
	require.Empty(t, res.Moves)

	// Drain pg2: its three shards go, one to each other host.
	cfg.Hosts[1].Drain = true
	applyHosts(t, cfg)
	plan, err = PlanRebalance(clustertest.Ctx(t), clustertest.Handle(t, cfg), PlanOptions{})
	require.NoError(t, err)
	require.Len(t, plan.Moves, 3)
	res, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Parallel: 3, Move: MoveOptions{Migrations: sampleSet(t), Mode: MoveOffline}})
	require.NoError(t, err)
	require.Len(t, res.Moves, 3)
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, map[string]int{"pg1": 4, "pg3": 4, "pg4": 4}, hostCounts(m))
	h, _ := m.Host("pg2")
	require.True(t, h.Drain)
	for s, n := range rows {
		require.Len(t, likeIDs(t, cfg, s), n, "shard %d", s)
	}
	requireVerifyOK(t, cfg)

	cl, err := Cleanup(clustertest.Ctx(t), clustertest.Handle(t, cfg), CleanupOptions{})
	require.NoError(t, err)
	require.Empty(t, cl.Dropped)
	require.Equal(t, 6, cl.Kept)
	require.Len(t, cl.KeptCopies, 6)
	for i, k := range cl.KeptCopies {
		require.NotEmpty(t, k.Schema)
		require.WithinDuration(t, time.Now().Add(DefaultKeep), k.KeepUntil, 10*time.Minute, "kept for the default --keep")
		if i > 0 {
			require.False(t, k.KeepUntil.Before(cl.KeptCopies[i-1].KeepUntil), "the earliest to expire first")
		}
	}
	// The drained host leaves the cluster file: refused while moves off it
	// still keep retired copies there, done once they are cleaned up.
	drained := cfg.Hosts[1]
	cfg.Hosts = append(cfg.Hosts[:1:1], cfg.Hosts[2:]...)
	_, err = install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.ErrorIs(t, err, shardmgr.ErrClusterMismatch)
	require.ErrorContains(t, err, "host pg2 is not in the file but")
	require.ErrorContains(t, err, "keep a retired copy there")
	cfg.Hosts = append(cfg.Hosts[:1:1], append([]shardmgr.Host{drained}, cfg.Hosts[1:]...)...)

	cl, err = Cleanup(clustertest.Ctx(t), clustertest.Handle(t, cfg), CleanupOptions{All: true})
	require.NoError(t, err)
	require.Len(t, cl.Dropped, 6)
	requireVerifyOK(t, cfg)

	cfg.Hosts = append(cfg.Hosts[:1:1], cfg.Hosts[2:]...)
	ir, err := install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	require.Contains(t, ir.CatalogChanges, "remove host pg2")
	_, ok := clustertest.ClusterMap(t, cfg).Host("pg2")
	require.False(t, ok, "pg2 left the catalog")
	requireVerifyOK(t, cfg)
}

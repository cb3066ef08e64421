package rebalance

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	shsql "github.com/shardid/shardid/sql"
)

// planMap places shards on hosts: counts[i] shards on hosts[i], in
// contiguous ranges as init does.
func planMap(hosts []string, counts []int) *shardmgr.ShardMap {
	m := &shardmgr.ShardMap{Generation: 7}
	id := 0
	for i, h := range hosts {
		m.Hosts = append(m.Hosts, shardmgr.CatalogHost{Name: h})
		for range counts[i] {
			m.Shards = append(m.Shards, shardmgr.Shard{ID: id, Schema: shsql.DefaultSchema(id), Host: h, State: shardmgr.StateActive})
			id++
		}
	}
	return m
}

func planHosts(names ...string) []shardmgr.Host {
	var out []shardmgr.Host
	for _, n := range names {
		h := shardmgr.Host{Name: n}
		if n[0] == '-' {
			h.Name, h.Drain = n[1:], true
		}
		out = append(out, h)
	}
	return out
}

func shardCounts(p *Plan) map[string]int {
	out := map[string]int{}
	for _, l := range p.After {
		out[l.Host] = l.Shards
	}
	return out
}

func TestPlanByCount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts []int    // on pg1..pgN of the map
		hosts  []string // the cluster file; "-pgX" drains
		moves  int
		after  map[string]int
	}{
		{"add a fourth host", []int{22, 21, 21}, []string{"pg1", "pg2", "pg3", "pg4"}, 16,
			map[string]int{"pg1": 16, "pg2": 16, "pg3": 16, "pg4": 16}},
		{"add two hosts", []int{22, 21, 21}, []string{"pg1", "pg2", "pg3", "pg4", "pg5"}, 25,
			map[string]int{"pg1": 13, "pg2": 13, "pg3": 13, "pg4": 13, "pg5": 12}},
		{"drain one", []int{22, 21, 21}, []string{"pg1", "-pg2", "pg3"}, 21,
			map[string]int{"pg1": 32, "pg2": 0, "pg3": 32}},
		{"drain while adding", []int{8, 8}, []string{"-pg1", "pg2", "pg3"}, 8,
			map[string]int{"pg1": 0, "pg2": 8, "pg3": 8}},
		{"balanced: nothing moves", []int{22, 21, 21}, []string{"pg1", "pg2", "pg3"}, 0,
			map[string]int{"pg1": 22, "pg2": 21, "pg3": 21}},
		// pg2 holds the mean already and keeps what it has; only pg1's
		// surplus moves.
		{"a balanced host gives nothing", []int{5, 4, 3}, []string{"pg1", "pg2", "pg3"}, 1,
			map[string]int{"pg1": 4, "pg2": 4, "pg3": 4}},
		{"a balanced host keeps its extra shard", []int{4, 3, 3}, []string{"pg1", "pg2", "pg3"}, 0,
			map[string]int{"pg1": 4, "pg2": 3, "pg3": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for i := range tc.counts {
				names = append(names, fmt.Sprintf("pg%d", i+1))
			}
			m := planMap(names, tc.counts)
			sizes := make([]int64, len(m.Shards))
			p, err := planMoves(m, planHosts(tc.hosts...), sizes, ByCount, nil)
			require.NoError(t, err)
			require.Len(t, p.Moves, tc.moves)
			require.Equal(t, tc.after, shardCounts(p))
			moved := map[int]bool{}
			for _, mv := range p.Moves {
				require.False(t, moved[mv.Shard], "shard %d moves twice", mv.Shard)
				moved[mv.Shard] = true
				require.Equal(t, m.Shards[mv.Shard].Host, mv.From)
			}
			// Deterministic: the same input, the same plan.
			again, err := planMoves(m, planHosts(tc.hosts...), sizes, ByCount, nil)
			require.NoError(t, err)
			require.Equal(t, p.Moves, again.Moves)
		})
	}
}

func TestPlanNoBalancedHostGivesAway(t *testing.T) {
	// 4,3,5 on three hosts plus a new one: the mean is 3; pg2 holds 3
	// and must give nothing; pg1 gives 1 and pg3 2 — the fewest moves.
	m := planMap([]string{"pg1", "pg2", "pg3"}, []int{4, 3, 5})
	p, err := planMoves(m, planHosts("pg1", "pg2", "pg3", "pg4"), make([]int64, 12), ByCount, nil)
	require.NoError(t, err)
	for _, mv := range p.Moves {
		require.NotEqual(t, "pg2", mv.From)
		require.Equal(t, "pg4", mv.To)
	}
	require.Equal(t, []PlannedMove{{Shard: 3, From: "pg1", To: "pg4"}, {Shard: 11, From: "pg3", To: "pg4"}, {Shard: 10, From: "pg3", To: "pg4"}}, p.Moves)
}

func TestPlanEveryHostDraining(t *testing.T) {
	m := planMap([]string{"pg1"}, []int{4})
	_, err := planMoves(m, planHosts("-pg1"), make([]int64, 4), ByCount, nil)
	require.ErrorIs(t, err, ErrNoTargetHost)
}

func TestPlanBySize(t *testing.T) {
	// pg1 holds one big shard and three small ones, pg2 four small ones,
	// pg3 is new. By count, pg1 and pg2 each give one shard; by size, the
	// big shard alone goes.
	m := planMap([]string{"pg1", "pg2"}, []int{4, 4})
	sizes := []int64{1000, 10, 10, 10, 10, 10, 10, 10}
	p, err := planMoves(m, planHosts("pg1", "pg2", "pg3"), sizes, BySize, nil)
	require.NoError(t, err)
	require.Equal(t, []PlannedMove{{Shard: 0, From: "pg1", To: "pg3", Bytes: 1000}}, p.Moves)

	// Equal sizes: the same moves as by count.
	m = planMap([]string{"pg1", "pg2", "pg3"}, []int{22, 21, 21})
	sizes = make([]int64, 64)
	for i := range sizes {
		sizes[i] = 8192
	}
	p, err = planMoves(m, planHosts("pg1", "pg2", "pg3", "pg4"), sizes, BySize, nil)
	require.NoError(t, err)
	require.Len(t, p.Moves, 16)
	require.Equal(t, map[string]int{"pg1": 16, "pg2": 16, "pg3": 16, "pg4": 16}, shardCounts(p))

	// Draining by size: every shard of the drained host, largest first to
	// the least loaded.
	m = planMap([]string{"pg1", "pg2", "pg3"}, []int{2, 2, 2})
	sizes = []int64{50, 10, 100, 100, 100, 100}
	p, err = planMoves(m, planHosts("-pg1", "pg2", "pg3"), sizes, BySize, nil)
	require.NoError(t, err)
	require.Equal(t, []PlannedMove{{Shard: 0, From: "pg1", To: "pg2", Bytes: 50}, {Shard: 1, From: "pg1", To: "pg3", Bytes: 10}}, p.Moves)
}

// TestPlanOnlyDrains: a plan limited to a draining host (shardid host
// drain) moves all of its shards and nothing else, where a full plan would
// also even out the other hosts.
func TestPlanOnlyDrains(t *testing.T) {
	m := planMap([]string{"pg1", "pg2", "pg3"}, []int{8, 2, 2})
	hosts := planHosts("pg1", "pg2", "-pg3")
	full, err := planMoves(m, hosts, make([]int64, 12), ByCount, nil)
	require.NoError(t, err)
	require.Len(t, full.Moves, 4, "the full plan evens pg1 and pg2 too")
	for _, by := range []PlanBy{ByCount, BySize} {
		sizes := make([]int64, 12)
		for i := range sizes {
			sizes[i] = int64(100 + i)
		}
		p, err := planMoves(m, hosts, sizes, by, []string{"pg3"})
		require.NoError(t, err)
		require.Len(t, p.Moves, 2, by)
		for _, mv := range p.Moves {
			require.Equal(t, "pg3", mv.From, by)
		}
		require.Equal(t, map[string]int{"pg1": 8, "pg2": 4, "pg3": 0}, shardCounts(p), by)
	}
}

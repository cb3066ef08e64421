package install

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

func TestBalancedRanges(t *testing.T) {
	for _, tc := range []struct {
		n, h int
		want [][2]int
	}{
		{64, 3, [][2]int{{0, 22}, {22, 43}, {43, 64}}},
		{3, 3, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{2, 3, [][2]int{{0, 1}, {1, 2}, {2, 2}}},
		{8192, 1, [][2]int{{0, 8192}}},
	} {
		require.Equal(t, tc.want, balancedRanges(tc.n, tc.h))
	}
}

func TestInitAndReinit(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 64, false)
	res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.True(t, res.CatalogCreated)
	require.Len(t, res.CreatedDatabases, 4)
	require.Equal(t, 64, res.Installed)
	require.EqualValues(t, 1, res.Generation)

	m, err := shardmgr.ReadMap(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog))
	require.NoError(t, err)
	counts := map[string]int{}
	for _, s := range m.Shards {
		counts[s.Host]++
		require.Equal(t, shardmgr.StateActive, s.State)
	}
	require.Equal(t, map[string]int{"pg1": 22, "pg2": 21, "pg3": 21}, counts)

	// Every generator really works on its host.
	for _, s := range m.Shards[20:24] {
		var id int64
		require.NoError(t, clustertest.HostPool(t, cfg, s.Host).QueryRow(clustertest.Ctx(t), "SELECT "+s.Schema+".next_id()").Scan(&id))
		require.Equal(t, s.ID, shardschema.ShardOf(m.Layout, id))
	}

	// Again: nothing changes.
	res, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.False(t, res.Changed(), "%+v", res)
	require.EqualValues(t, 1, res.Generation)
	require.Equal(t, 64, res.Unchanged)

	// A missing shard schema and a missing host record are finished.
	_, err = clustertest.HostPool(t, cfg, "pg2").Exec(clustertest.Ctx(t), "DROP SCHEMA shard_0030 CASCADE")
	require.NoError(t, err)
	_, err = clustertest.HostPool(t, cfg, "pg3").Exec(clustertest.Ctx(t), "DELETE FROM shardid.local_shards WHERE shard = 50")
	require.NoError(t, err)
	res, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, res.Installed)
	require.EqualValues(t, 1, res.Generation)
}

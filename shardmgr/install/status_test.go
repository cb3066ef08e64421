package install

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/catalog"
	"github.com/shardid/shardid/shardmgr/verify"
)

func TestStatusJSONShape(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 5)
	_, err := catalog.SetShardState(ctx(t), pool(t, cfg.Catalog), 3, shardmgr.StateReadOnly, 1)
	require.NoError(t, err)
	st, err := ClusterStatus(ctx(t), cfg)
	require.NoError(t, err)
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.JSONEq(t, `{"generation":2,
		"hosts":[{"name":"pg1","shards":[0,1]},{"name":"pg2","shards":[2,3]},{"name":"pg3","shards":[4]}],
		"shards":[
			{"id":0,"schema":"shard_0000","host":"pg1","state":"active"},
			{"id":1,"schema":"shard_0001","host":"pg1","state":"active"},
			{"id":2,"schema":"shard_0002","host":"pg2","state":"active"},
			{"id":3,"schema":"shard_0003","host":"pg2","state":"read-only"},
			{"id":4,"schema":"shard_0004","host":"pg3","state":"active"}]}`, string(b))
}

func TestStatusBeforeInit(t *testing.T) {
	t.Parallel()
	cfg := testCluster(t, 4, true)
	_, err := ClusterStatus(ctx(t), cfg)
	require.ErrorIs(t, err, shardmgr.ErrNotInitialized)
}

func TestInitRefusesAContradictingFile(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	for _, change := range []func(c *shardmgr.Config){
		func(c *shardmgr.Config) { c.Shards = 8 },
		func(c *shardmgr.Config) { c.EpochMS = 1_400_000_000_000 },
		func(c *shardmgr.Config) { c.Cluster = "other" },
		func(c *shardmgr.Config) { c.Hosts = c.Hosts[:2] }, // pg3 holds shards
	} {
		c := *cfg
		c.Hosts = append([]shardmgr.Host(nil), cfg.Hosts...)
		change(&c)
		_, err := Init(ctx(t), &c, InitOptions{})
		require.ErrorIs(t, err, shardmgr.ErrClusterMismatch)
	}
	gen, err := catalog.Generation(ctx(t), pool(t, cfg.Catalog))
	require.NoError(t, err)
	require.EqualValues(t, 1, gen, "nothing changed")
}

func TestInitAddsAHost(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	extra := testCluster(t, 4, false).Hosts[0] // a fresh database on the first server
	extra.Name = "pg4"
	cfg.Hosts = append(cfg.Hosts, extra)
	res, err := Init(ctx(t), cfg, InitOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"add host pg4"}, res.CatalogChanges)
	require.EqualValues(t, 2, res.Generation)
	st, err := ClusterStatus(ctx(t), cfg)
	require.NoError(t, err)
	require.Equal(t, HostStatus{Name: "pg4", Shards: []int{}}, st.Hosts[3])
	rep, err := verify.Verify(ctx(t), cfg, verify.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
}

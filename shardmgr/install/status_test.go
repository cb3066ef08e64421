package install

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

func TestStatusJSONShape(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 5)
	_, err := catalog.SetShardState(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog), 3, shardmgr.StateReadOnly, 1)
	require.NoError(t, err)
	st, err := ClusterStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg))
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
			{"id":4,"schema":"shard_0004","host":"pg3","state":"active"}],
		"moves":[]}`, string(b))
}

func TestStatusMovesInProgress(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 5)
	cat := clustertest.Pool(t, cfg.Catalog)
	// Journal rows as apply writes them: one running, one stopped by an
	// error, one finished and one aborted (neither of those is listed).
	for _, row := range []struct {
		shard      int
		from, to   string
		phase, err string
	}{
		{4, "pg3", "pg1", "copy", ""},
		{1, "pg1", "pg2", "cleaned", ""},
		{0, "pg1", "pg3", "aborted", ""},
		{2, "pg2", "pg3", "catchup", "replication: slot lost"},
	} {
		_, err := cat.Exec(clustertest.Ctx(t), `INSERT INTO shardid.moves (shard, from_host, to_host, mode, phase, repl_name, schema_name, bytes, rows_copied, error)
			VALUES ($1, $2, $3, 'online', $4, $6, $7, 8192, 42, $5)`, row.shard, row.from, row.to, row.phase, row.err, fmt.Sprintf("test-%d", row.shard), fmt.Sprintf("shard_%04d", row.shard))
		require.NoError(t, err)
	}
	st, err := ClusterStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg))
	require.NoError(t, err)
	require.Len(t, st.Moves, 2)
	require.Equal(t, MoveStatus{ID: st.Moves[0].ID, Shard: 4, From: "pg3", To: "pg1", Mode: "online", Phase: "copy", Bytes: 8192, Rows: 42, Started: st.Moves[0].Started}, st.Moves[0])
	require.WithinDuration(t, time.Now(), st.Moves[0].Started, time.Minute)
	require.Equal(t, 2, st.Moves[1].Shard)
	require.Equal(t, "catchup", st.Moves[1].Phase)
	require.Equal(t, "replication: slot lost", st.Moves[1].Error)
	require.Less(t, st.Moves[0].ID, st.Moves[1].ID)
}

func TestStatusBeforeInit(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 4, true)
	_, err := ClusterStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg))
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
		_, err := Init(clustertest.Ctx(t), clustertest.Handle(t, &c), InitOptions{})
		require.ErrorIs(t, err, shardmgr.ErrClusterMismatch)
	}
	gen, err := catalog.Generation(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog))
	require.NoError(t, err)
	require.EqualValues(t, 1, gen, "nothing changed")
}

func TestInitAddsAHost(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	extra := clustertest.Cluster(t, 4, false).Hosts[0] // a fresh database on the first server
	extra.Name = "pg4"
	cfg.Hosts = append(cfg.Hosts, extra)
	res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"add host pg4"}, res.CatalogChanges)
	require.EqualValues(t, 2, res.Generation)
	st, err := ClusterStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg))
	require.NoError(t, err)
	require.Equal(t, HostStatus{Name: "pg4", Shards: []int{}}, st.Hosts[3])
	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
}

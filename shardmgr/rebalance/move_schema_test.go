package rebalance

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
)

// A move writes both hosts' own records (shardid.local_shards): it refuses
// a host whose schema a newer shardid migrated, and journals nothing.
func TestMoveRefusesHostSchemaTooNew(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 4)
	m := clustertest.ClusterMap(t, cfg)
	_, err := clustertest.HostPool(t, cfg, "pg3").Exec(clustertest.Ctx(t), `UPDATE shardid.host_migrations SET version = version + 1`)
	require.NoError(t, err)
	require.NotEqual(t, "pg3", m.Shards[0].Host)

	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg3", MoveOptions{})
	require.ErrorIs(t, err, shardmgr.ErrCatalogTooNew)
	require.ErrorContains(t, err, fmt.Sprintf("host pg3's shardid schema was upgraded to schema %d by a newer shardid; this binary knows %d", shardmgr.HostSchema+1, shardmgr.HostSchema))
	var moves int
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM shardid.moves`).Scan(&moves))
	require.Zero(t, moves, "the move was journaled")
	require.Equal(t, m.Generation, clustertest.ClusterMap(t, cfg).Generation)
}

package rebalance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
)

// A move writes both hosts' own records (shardid.local_shards): it refuses
// a host whose schema a newer shardid migrated, and journals nothing.
func TestMoveRefusesHostSchemaTooNew(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	m := clusterMap(t, cfg)
	_, err := hostPool(t, cfg, "pg3").Exec(ctx(t), `UPDATE shardid.host_migrations SET version = version + 1`)
	require.NoError(t, err)
	require.NotEqual(t, "pg3", m.Shards[0].Host)

	_, err = MoveShard(ctx(t), clustertest.Handle(t, cfg), 0, "pg3", MoveOptions{})
	require.ErrorIs(t, err, shardmgr.ErrCatalogTooNew)
	require.ErrorContains(t, err, "host pg3's shardid schema was upgraded to schema 2 by a newer shardid; this binary knows 1")
	var moves int
	require.NoError(t, pool(t, cfg.Catalog).QueryRow(ctx(t), `SELECT count(*) FROM shardid.moves`).Scan(&moves))
	require.Zero(t, moves, "the move was journaled")
	require.Equal(t, m.Generation, clusterMap(t, cfg).Generation)
}

package shardmgr_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	shcatalog "github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// Exec and QueryRow: one statement, one round trip, no transaction
// around it, with the refusals of Tx: a read-only or moving shard in the
// map, a fenced copy on the host.
func TestRouterSingleStatements(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	_, err := migrate.Migrate(ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))

	tag, err := r.Exec(ctx(t), 1, `INSERT INTO shard_0001.likes (user_id, post_id) VALUES ($1, $2)`, 7, 42)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	var id int64
	require.NoError(t, r.QueryRow(ctx(t), 2, []any{&id}, `INSERT INTO shard_0002.likes (user_id, post_id) VALUES ($1, $2) RETURNING id`, 7, 43))
	s, err := r.ShardForID(idgen.ID(id))
	require.NoError(t, err)
	require.Equal(t, 2, s, "the id came from shard 2's DEFAULT")
	// Autocommit: no transaction block around the statement (VACUUM
	// refuses to run inside one).
	_, err = r.Exec(ctx(t), 2, `VACUUM shard_0002.likes`)
	require.NoError(t, err, "no transaction around the statement")
	require.ErrorIs(t, r.QueryRow(ctx(t), 2, []any{&id}, `SELECT 1 WHERE false`), pgx.ErrNoRows)

	catalog := pool(t, cfg.Catalog)
	_, err = shcatalog.SetShardState(ctx(t), catalog, 1, shardmgr.StateReadOnly, 0)
	require.NoError(t, err)
	_, err = shcatalog.SetShardState(ctx(t), catalog, 2, shardmgr.StateMoving, 0)
	require.NoError(t, err)
	_, err = r.Reload(ctx(t))
	require.NoError(t, err)
	_, err = r.Exec(ctx(t), 1, `INSERT INTO shard_0001.likes (user_id, post_id) VALUES (1, 1)`)
	require.ErrorIs(t, err, shardmgr.ErrShardReadOnly)
	err = r.QueryRow(ctx(t), 2, []any{&id}, `INSERT INTO shard_0002.likes (user_id, post_id) VALUES (1, 1) RETURNING id`)
	require.ErrorIs(t, err, shardmgr.ErrShardMoving)

	// A fenced copy the map still calls active: the host refuses, the
	// router says moving; with WithRetryMoving it waits and gives up.
	h := hostPool(t, cfg, r.Map().Shards[3].Host)
	require.NoError(t, fence.Install(ctx(t), h, "shard_0003", true))
	_, err = r.Exec(ctx(t), 3, `INSERT INTO shard_0003.likes (user_id, post_id) VALUES (1, 1)`)
	require.ErrorIs(t, err, shardmgr.ErrShardMoving)
	rr := openRouter(t, cfg, shardmgr.WithRefreshInterval(0), shardmgr.WithRetryMoving(300*time.Millisecond))
	began := time.Now()
	_, err = rr.Exec(ctx(t), 3, `INSERT INTO shard_0003.likes (user_id, post_id) VALUES (1, 1)`)
	require.ErrorIs(t, err, shardmgr.ErrShardMoving)
	require.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond, "retried for the WithRetryMoving bound")
	var n int
	require.NoError(t, h.QueryRow(ctx(t), `SELECT count(*) FROM shard_0003.likes`).Scan(&n))
	require.Zero(t, n, "nothing written past the fence")
}

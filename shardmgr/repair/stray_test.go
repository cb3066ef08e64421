package repair

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	shsql "github.com/shardid/shardid/sql"
)

// strayCluster is a cluster of six shards with a stray copy of shard 1
// on a host the catalog does not place it on (as an init against another
// catalog leaves one: a live generator), and a table items with a
// composite primary key of rows rows, the same on both copies. It returns
// the config, the stray's host and the live one's.
func strayCluster(t *testing.T, rows int) (*shardmgr.Config, string, string) {
	t.Helper()
	ctx := clustertest.Ctx(t)
	cfg := installtest.Cluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	live := m.Shards[1].Host
	stray := m.Shards[5].Host
	require.NotEqual(t, live, stray)
	ddl, err := shsql.Render(shsql.Params{Shard: 1})
	require.NoError(t, err)
	table := fmt.Sprintf(`CREATE TABLE shard_0001.items (a int, b text, v text, PRIMARY KEY (a, b));
		INSERT INTO shard_0001.items SELECT g / 3, 'k' || g %% 3, 'row ' || g FROM generate_series(0, %d) g`, rows-1)
	_, err = clustertest.HostPool(t, cfg, live).Exec(ctx, table)
	require.NoError(t, err)
	sp := clustertest.HostPool(t, cfg, stray)
	_, err = sp.Exec(ctx, ddl)
	require.NoError(t, err)
	_, err = sp.Exec(ctx, table)
	require.NoError(t, err)
	_, err = sp.Exec(ctx, `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES (1, 'shard_0001', 'active', 1)`)
	require.NoError(t, err)
	return cfg, stray, live
}

func strayExists(t *testing.T, cfg *shardmgr.Config, host string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, clustertest.HostPool(t, cfg, host).QueryRow(clustertest.Ctx(t),
		`SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'shard_0001')`).Scan(&ok))
	return ok
}

// DropStray compares keys in batches that start after the last key of the
// batch before (keyset): with 25,000 rows (three batches) and a composite
// key, a row missing from the live copy's middle batch is found, and once
// it is back the stray goes with every row counted. (Before, batches
// were LIMIT/OFFSET: the same answers, each batch reading all rows before
// it again.)
func TestDropStrayComparesInKeyBatches(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg, stray, live := strayCluster(t, 25000)
	lp := clustertest.HostPool(t, cfg, live)
	_, err := lp.Exec(ctx, `DELETE FROM shard_0001.items WHERE a = 4000 AND b = 'k1'`)
	require.NoError(t, err)

	_, err = DropStray(ctx, clustertest.Handle(t, cfg), 1, stray, 0)
	var se *StrayRowsError
	require.ErrorAs(t, err, &se)
	require.Equal(t, map[string]int64{"items": 1}, se.Tables)
	require.True(t, strayExists(t, cfg, stray))

	_, err = lp.Exec(ctx, `INSERT INTO shard_0001.items VALUES (4000, 'k1', 'back')`)
	require.NoError(t, err)
	d, err := DropStray(ctx, clustertest.Handle(t, cfg), 1, stray, 0)
	require.NoError(t, err)
	require.EqualValues(t, 25000, d.Rows)
	require.False(t, strayExists(t, cfg, stray))
}

// A schema shard_0001 that another role owns on the stray's host is not a
// copy the toolkit left: DropStray refuses it (shardmgr.ErrUntrusted,
// naming the owner) before DROP SCHEMA ... CASCADE, and nothing changes.
// Failed before: it was dropped with everything in it.
func TestDropStrayRefusesAnotherRolesSchema(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg, stray, _ := strayCluster(t, 10)
	owner := clustertest.Role(t, cfg, "stranger")
	sp := clustertest.HostPool(t, cfg, stray)
	_, err := sp.Exec(ctx, `ALTER SCHEMA shard_0001 OWNER TO `+pgx.Identifier{owner}.Sanitize())
	require.NoError(t, err)

	_, err = DropStray(ctx, clustertest.Handle(t, cfg), 1, stray, 0)
	require.ErrorIs(t, err, shardmgr.ErrUntrusted)
	require.ErrorContains(t, err, "schema shard_0001 belongs to "+owner)
	require.True(t, strayExists(t, cfg, stray))
	var n int
	require.NoError(t, sp.QueryRow(ctx, `SELECT count(*) FROM shardid.local_shards WHERE shard = 1`).Scan(&n))
	require.Equal(t, 1, n, "the host's record unchanged")

	// Given back to the toolkit's role, it goes.
	_, err = sp.Exec(ctx, `ALTER SCHEMA shard_0001 OWNER TO current_user`)
	require.NoError(t, err)
	_, err = DropStray(context.WithoutCancel(ctx), clustertest.Handle(t, cfg), 1, stray, 0)
	require.NoError(t, err)
	require.False(t, strayExists(t, cfg, stray))
}

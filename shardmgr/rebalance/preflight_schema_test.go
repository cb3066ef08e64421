package rebalance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A shard migrated above version 0, moved without the migrations (as
// `shardid shard move 0 --to pg4 --mode offline` without --dir): the move
// and the apply are refused by the preflight, naming the migrations, and
// nothing is journaled, registered or built.
func TestPreflightMigrationsNeeded(t *testing.T) {
	t.Parallel()
	cfg := stockCluster(t, nil, nil)
	gen := clustertest.ClusterMap(t, cfg).Generation

	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Mode: MoveOffline})
	require.ErrorIs(t, err, ErrPreflight)
	require.ErrorIs(t, err, ErrMigrationsNeeded)
	c := failedCheck(t, err, "pg1", CheckMigrations)
	require.Equal(t, []int{0}, c.Shards)
	require.Equal(t, "not given", c.Value)
	require.True(t, c.Fix.Migrations, "the fix names the migrations")
	requireNothingChanged(t, cfg, gen)

	// The drain: pg1 is marked drain; apply offline without migrations.
	_, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Move: MoveOptions{Mode: MoveOffline}})
	require.ErrorIs(t, err, ErrMigrationsNeeded)
	failedCheck(t, err, "pg1", CheckMigrations)
	requireNothingChanged(t, cfg, gen)
}

// A table made by hand in a moving shard, and golang-migrate's version
// table left there by its CLI: the preflight refuses the move, naming
// each table (golang-migrate's as such, with the SQL that drops it), and
// nothing changes; without them the same move passes the preflight,
// whose scratch build of the migrations makes the tables the shard has.
func TestPreflightShardTables(t *testing.T) {
	t.Parallel()
	cfg := stockCluster(t, nil, nil)
	gen := clustertest.ClusterMap(t, cfg).Generation
	pg1 := clustertest.HostPool(t, cfg, "pg1")
	_, err := pg1.Exec(clustertest.Ctx(t), `CREATE TABLE shard_0000.likes_manual (id bigint PRIMARY KEY);
		CREATE TABLE shard_0000.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`)
	require.NoError(t, err)

	for _, mode := range []MoveMode{MoveOffline, MoveOnline} {
		_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Mode: mode, Migrations: sampleSet(t)})
		require.ErrorIs(t, err, ErrPreflight, mode)
		require.ErrorIs(t, err, ErrShardTables, mode)
		c := failedCheck(t, err, "pg1", CheckShardTables)
		require.Equal(t, []int{0}, c.Shards)
		require.Contains(t, c.Value, `"shard_0000"."likes_manual" was not made by the migrations`)
		require.Contains(t, c.Value, `"shard_0000"."schema_migrations" is golang-migrate's version table`)
		require.Equal(t, `DROP TABLE "shard_0000"."schema_migrations"`, c.Fix.SQL)
		require.True(t, c.Fix.Tables)
		requireNothingChanged(t, cfg, gen)
	}

	// A table the migrations make but the source lacks is named too.
	_, err = pg1.Exec(clustertest.Ctx(t), `DROP TABLE shard_0000.likes_manual, shard_0000.schema_migrations, shard_0000.likes`)
	require.NoError(t, err)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t)})
	c := failedCheck(t, err, "pg1", CheckShardTables)
	require.Contains(t, c.Value, `the migrations make "shard_0000"."likes", which the source lacks`)
	requireNothingChanged(t, cfg, gen)

	_, err = pg1.Exec(clustertest.Ctx(t), `CREATE TABLE shard_0000.likes (id bigint PRIMARY KEY DEFAULT shard_0000.next_id(), user_id bigint NOT NULL, post_id bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	applyHosts(t, cfg) // the preflight refused before the hosts mattered
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	// The scratch schema was rolled back.
	var scratch int
	require.NoError(t, pg1.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'shardid_preflight%'`).Scan(&scratch))
	require.Zero(t, scratch)
}

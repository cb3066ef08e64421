package rebalance

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// plantOnHost lets role planter (no superuser) put a statement trigger of
// its own on host's shardid.local_shards, whose function makes it a
// superuser, and a table of its own in schema shardid: what CREATE on the
// schema and TRIGGER on the table, granted by mistake, allow. It returns
// the SQL that takes both away again.
func plantOnHost(t *testing.T, cfg *shardmgr.Config, host, planter string, trigger bool) string {
	t.Helper()
	ctx := clustertest.Ctx(t)
	h, ok := cfg.Host(host)
	require.True(t, ok)
	q := pgx.Identifier{planter}.Sanitize()
	admin := clustertest.HostPool(t, cfg, host)
	_, err := admin.Exec(ctx, `GRANT USAGE, CREATE ON SCHEMA shardid TO `+q+`; GRANT TRIGGER ON shardid.local_shards TO `+q+`;
		CREATE SCHEMA `+q+` AUTHORIZATION `+q)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, clustertest.AsRole(t, h.DSN, planter))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE shardid.host_notes (note text)`)
	require.NoError(t, err)
	undo := `DROP TABLE shardid.host_notes; REVOKE USAGE, CREATE ON SCHEMA shardid FROM ` + q + `; REVOKE TRIGGER ON shardid.local_shards FROM ` + q
	if trigger {
		_, err = conn.Exec(ctx, `CREATE FUNCTION `+q+`.f() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN EXECUTE format('ALTER ROLE %I SUPERUSER', current_user); RETURN NULL; END $$;
			CREATE TRIGGER planted AFTER INSERT OR UPDATE OR DELETE ON shardid.local_shards
				FOR EACH STATEMENT EXECUTE FUNCTION `+q+`.f()`)
		require.NoError(t, err)
		undo = `DROP TRIGGER planted ON shardid.local_shards; ` + undo
	}
	return undo
}

func isSuper(t *testing.T, cfg *shardmgr.Config, host, role string) bool {
	t.Helper()
	var super bool
	require.NoError(t, clustertest.HostPool(t, cfg, host).QueryRow(clustertest.Ctx(t),
		`SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = $1`, role).Scan(&super))
	return super
}

func movesOf(t *testing.T, cfg *shardmgr.Config, shard int) int {
	t.Helper()
	var n int
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t),
		`SELECT count(*) FROM shardid.moves WHERE shard = $1`, shard).Scan(&n))
	return n
}

// Issue 27, item 1: a move to or from a host and an abort write the
// host's shardid.local_shards; with a trigger and a table an ordinary
// role planted in the host's schema shardid (the source's or the
// target's), each is refused before it writes, naming the object and its
// owner: no journal row, the host's records unchanged, the planter still
// not a superuser. Once they are gone, both go through. Failed before:
// the move wrote local_shards as the superuser and fired the trigger.
func TestMoveAndAbortRefuseUntrustedHostSchema(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := moveCluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	src := m.Shards[0].Host
	require.Equal(t, src, m.Shards[1].Host, "both shards on one host")

	// Shard 1's move stopped while fenced: an abort has work to do.
	stopped := MoveOptions{Migrations: sampleSet(t)}
	stopped.stopAfter = PhaseFenced
	_, err := MoveShard(ctx, clustertest.Handle(t, cfg), 1, "pg4", stopped)
	require.ErrorIs(t, err, errStopped)
	open := movesOf(t, cfg, 1)

	planter := clustertest.Role(t, cfg, "planter")
	undo := plantOnHost(t, cfg, src, planter, true)
	before := hostRecords(t, cfg)

	_, err = MoveShard(ctx, clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.ErrorContains(t, err, "shardid.local_shards")
	require.ErrorContains(t, err, planter)
	require.Zero(t, movesOf(t, cfg, 0), "nothing journaled")

	_, err = AbortMove(ctx, clustertest.Handle(t, cfg), []int{1})
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.ErrorContains(t, err, planter)
	require.Equal(t, before, hostRecords(t, cfg), "no host record written")
	require.False(t, isSuper(t, cfg, src, planter), "the planter is still no superuser")
	require.Equal(t, open, movesOf(t, cfg, 1))
	require.Equal(t, shardmgr.StateMoving, clustertest.ClusterMap(t, cfg).Shards[1].State, "the move is still open")

	// The target's schema: a table of the planter's is enough.
	_, err = clustertest.HostPool(t, cfg, src).Exec(ctx, undo)
	require.NoError(t, err)
	undo = plantOnHost(t, cfg, "pg4", planter, false)
	_, err = MoveShard(ctx, clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.ErrorContains(t, err, "shardid.host_notes")
	require.Zero(t, movesOf(t, cfg, 0), "nothing journaled")
	_, err = AbortMove(ctx, clustertest.Handle(t, cfg), []int{1})
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.Equal(t, before, hostRecords(t, cfg), "no host record written")

	// Trusted again: both go through.
	_, err = clustertest.HostPool(t, cfg, "pg4").Exec(ctx, undo)
	require.NoError(t, err)
	_, err = AbortMove(ctx, clustertest.Handle(t, cfg), []int{1})
	require.NoError(t, err)
	_, err = MoveShard(ctx, clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.False(t, isSuper(t, cfg, src, planter))
}

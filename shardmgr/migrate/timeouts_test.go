package migrate_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/verify"
)

// A managed server's DBA gave the toolkit's role (not a superuser, one
// that may create databases) 1 s timeouts (ALTER ROLE ... SET
// statement_timeout, idle_in_transaction_session_timeout and, on 17+,
// transaction_timeout). init with shard migrations that each run 1.2 s,
// migrate up with another such migration, and a deep verify whose read of
// a table takes about 1.6 s (a row-level security policy that costs 0.4 s
// a row, forced on the table's owner) all pass: the toolkit's sessions
// set their own timeouts. Failed before: init's shard migrations ended at
// the role's statement_timeout.
func TestInitMigrateVerifyUnderRoleTimeouts(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 3, false)
	role := clustertest.Role(t, cfg, "timed")
	q := pgx.Identifier{role}.Sanitize()
	// Role settings are each server's (pg_db_role_setting is shared by
	// its databases).
	for _, s := range pgtest.Servers(t, 3) {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		require.NoError(t, err)
		var major int
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int / 10000`).Scan(&major))
		sets := `ALTER ROLE ` + q + ` CREATEDB; ALTER ROLE ` + q + ` SET statement_timeout = '1s'; ALTER ROLE ` + q + ` SET idle_in_transaction_session_timeout = '1s'`
		if major >= 17 {
			sets += `; ALTER ROLE ` + q + ` SET transaction_timeout = '1s'`
		}
		_, err = conn.Exec(ctx, sets)
		conn.Close(ctx)
		require.NoError(t, err)
	}
	managed := *cfg
	managed.Catalog = clustertest.AsRole(t, cfg.Catalog, role)
	managed.Hosts = nil
	for _, h := range cfg.Hosts {
		h.DSN = clustertest.AsRole(t, h.DSN, role)
		managed.Hosts = append(managed.Hosts, h)
	}
	c := clustertest.Handle(t, &managed)

	// The role's settings hold for its sessions outside the toolkit.
	plain, err := pgx.Connect(ctx, clustertest.AsRole(t, pgtest.Servers(t, 1)[0].DSN("postgres"), role))
	require.NoError(t, err)
	_, err = plain.Exec(ctx, `SELECT pg_sleep(1.5)`)
	require.Error(t, err)
	plain.Close(context.WithoutCancel(ctx))

	files := map[string]string{"001_slow.sql": `SELECT pg_catalog.pg_sleep(1.2);
CREATE TABLE {{.schema}}.a (id bigint PRIMARY KEY DEFAULT {{.next_id}}, n int);`}
	set, err := migrate.LoadMigrationSet(clustertest.MapFS(files))
	require.NoError(t, err)
	_, err = install.Init(ctx, c, install.InitOptions{Migrations: set})
	require.NoError(t, err, "init")

	files["002_slower.sql"] = `SELECT pg_catalog.pg_sleep(1.2);
CREATE FUNCTION {{.schema}}.slow_true() RETURNS boolean VOLATILE LANGUAGE plpgsql AS $f$
BEGIN PERFORM pg_catalog.pg_sleep(0.4); RETURN true; END $f$;
ALTER TABLE {{.schema}}.a ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY slow ON {{.schema}}.a USING ({{.schema}}.slow_true()) WITH CHECK (true);`
	set, err = migrate.LoadMigrationSet(clustertest.MapFS(files))
	require.NoError(t, err)
	res, err := migrate.Migrate(ctx, c, set, migrate.Options{})
	require.NoError(t, err, "migrate up")
	up, _, _, _ := res.Counts()
	require.Equal(t, 3, up)

	m := clustertest.ClusterMap(t, cfg)
	_, err = clustertest.HostPool(t, cfg, m.Shards[1].Host).Exec(ctx, `INSERT INTO `+pgx.Identifier{m.Shards[1].Schema, "a"}.Sanitize()+` (n) SELECT g FROM generate_series(1, 4) g`)
	require.NoError(t, err)
	rep, err := verify.Verify(ctx, c, verify.Options{Deep: true})
	require.NoError(t, err, "verify")
	require.True(t, rep.OK, "verify: %v", rep.Problems)
}

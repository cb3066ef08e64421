package install

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// ownDatabase makes role the owner of dsn's database, as a database made
// in advance for the application is (CREATE DATABASE app OWNER app),
// and returns dsn connecting as role.
func ownDatabase(t *testing.T, dsn, role string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	_, err = clustertest.Pool(t, dsn).Exec(clustertest.Ctx(t), `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` OWNER TO `+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	return clustertest.AsRole(t, dsn, role)
}

// promoteSQL is a statement trigger on each of tables, the planter's,
// that makes role a superuser when the toolkit (a superuser) writes one.
func promoteSQL(role string, tables ...string) string {
	s := fmt.Sprintf(`
CREATE FUNCTION shardid.promote() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN ALTER ROLE %s SUPERUSER; RETURN NULL; END$$;`,
		pgx.Identifier{role}.Sanitize())
	for _, t := range tables {
		s += fmt.Sprintf(`
CREATE TRIGGER promote AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT EXECUTE FUNCTION shardid.promote();`, t)
	}
	return s
}

func requireNotSuperuser(t *testing.T, dsn, role string) {
	t.Helper()
	var super bool
	require.NoError(t, clustertest.Pool(t, dsn).QueryRow(clustertest.Ctx(t), `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, role).Scan(&super))
	require.False(t, super, "the planter %s became a superuser", role)
}

// schemas lists the schemas of dsn's database that are shardid's or a
// shard's.
func schemas(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := clustertest.Pool(t, dsn).Query(clustertest.Ctx(t), `SELECT nspname FROM pg_namespace WHERE nspname = 'shardid' OR nspname LIKE 'shard\_%' ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// tables lists the tables in schema shardid of dsn's database.
func tables(t *testing.T, dsn string) []string {
	t.Helper()
	rows, err := clustertest.Pool(t, dsn).Query(clustertest.Ctx(t), `SELECT relname FROM pg_class WHERE relnamespace = 'shardid'::regnamespace AND relkind = 'r' ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// The role that owns a host's database plants shardid's host record
// (version 1, host_info, local_shards with a statement trigger): init
// refuses it before writing anything anywhere, naming the schema and its
// owner, and the planter is still not a superuser. (Failed before: init
// adopted the schema and ran the trigger as the superuser.)
func TestInitRefusesPlantedHostSchema(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 6, true)
	app := clustertest.Role(t, cfg, "app")
	appDSN := ownDatabase(t, cfg.Hosts[1].DSN, app)
	_, err := clustertest.Pool(t, appDSN).Exec(clustertest.Ctx(t), `
CREATE SCHEMA shardid;
CREATE TABLE shardid.host_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
INSERT INTO shardid.host_migrations VALUES (1, false);
CREATE TABLE shardid.host_info (id boolean PRIMARY KEY DEFAULT true CHECK (id), cluster text NOT NULL, host text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE shardid.local_shards (shard integer PRIMARY KEY, schema_name text NOT NULL UNIQUE, state text NOT NULL, generation bigint NOT NULL, installed_at timestamptz NOT NULL DEFAULT now());
`+promoteSQL(app, "shardid.local_shards", "shardid.host_info")+`
GRANT ALL ON ALL TABLES IN SCHEMA shardid TO PUBLIC;`)
	require.NoError(t, err)

	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.Contains(t, err.Error(), "host pg2: database "+dbName(t, cfg.Hosts[1].DSN)+": schema shardid belongs to "+app)
	require.Contains(t, err.Error(), "DROP SCHEMA shardid CASCADE")
	require.NotContains(t, err.Error(), "\n")
	requireNotSuperuser(t, cfg.Catalog, app)

	require.Empty(t, schemas(t, cfg.Catalog), "nothing written to the catalog")
	require.Empty(t, schemas(t, cfg.Hosts[0].DSN))
	require.Equal(t, []string{"shardid"}, schemas(t, cfg.Hosts[1].DSN))
	require.Equal(t, []string{"host_info", "host_migrations", "local_shards"}, tables(t, cfg.Hosts[1].DSN))
	var n int
	require.NoError(t, clustertest.Pool(t, cfg.Hosts[1].DSN).QueryRow(clustertest.Ctx(t), `SELECT (SELECT count(*) FROM shardid.host_info) + (SELECT count(*) FROM shardid.local_shards)`).Scan(&n))
	require.Zero(t, n)

	// Dropped, as the error says: init goes through.
	_, err = clustertest.Pool(t, cfg.Hosts[1].DSN).Exec(clustertest.Ctx(t), `DROP SCHEMA shardid CASCADE`)
	require.NoError(t, err)
	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	requireNotSuperuser(t, cfg.Catalog, app)
}

func dbName(t *testing.T, dsn string) string {
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	return strings.TrimPrefix(u.Path, "/")
}

// The role that owns the catalog's database plants an empty shardid
// schema: init refuses it, creating nothing in it or on any host.
// (Failed before: init created the catalog in it, which its owner could
// then drop and replace.)
func TestInitRefusesPlantedCatalogSchema(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 6, true)
	app := clustertest.Role(t, cfg, "app")
	appDSN := ownDatabase(t, cfg.Catalog, app)
	_, err := clustertest.Pool(t, appDSN).Exec(clustertest.Ctx(t), `CREATE SCHEMA shardid`)
	require.NoError(t, err)

	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.Contains(t, err.Error(), "catalog: database "+dbName(t, cfg.Catalog)+": schema shardid belongs to "+app)
	require.Empty(t, tables(t, cfg.Catalog))
	for _, h := range cfg.Hosts {
		require.Empty(t, schemas(t, h.DSN), h.Name)
	}
	requireNotSuperuser(t, cfg.Catalog, app)
}

// A role that owns a host's database made schema shard_0000 before init:
// init refuses it, naming its owner and the fix, and installs nothing.
// (Failed before: init installed the generator in it, whose counter the
// schema's owner could drop and replace.)
func TestInitRefusesShardSchemaOfAnotherRole(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 6, true)
	app := clustertest.Role(t, cfg, "app")
	appDSN := ownDatabase(t, cfg.Hosts[0].DSN, app)
	_, err := clustertest.Pool(t, appDSN).Exec(clustertest.Ctx(t), `CREATE SCHEMA shard_0000`)
	require.NoError(t, err)

	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.Contains(t, err.Error(), "host pg1: database "+dbName(t, cfg.Hosts[0].DSN)+": schema shard_0000 belongs to "+app)
	require.Contains(t, err.Error(), "ALTER SCHEMA shard_0000 OWNER TO")
	require.Empty(t, schemas(t, cfg.Catalog))
	require.Equal(t, []string{"shard_0000"}, schemas(t, cfg.Hosts[0].DSN))
	var fns int
	require.NoError(t, clustertest.Pool(t, cfg.Hosts[0].DSN).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_proc WHERE pronamespace = 'shard_0000'::regnamespace`).Scan(&fns))
	require.Zero(t, fns, "no generator installed in it")

	// Given to the toolkit's role, as the error says: init installs.
	_, err = clustertest.Pool(t, cfg.Hosts[0].DSN).Exec(clustertest.Ctx(t), `ALTER SCHEMA shard_0000 OWNER TO CURRENT_USER`)
	require.NoError(t, err)
	res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.Equal(t, 6, res.Installed)
}

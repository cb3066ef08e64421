package pgtrust_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/pgtrust"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var roles atomic.Int64

// role creates a login role, not a superuser, dropped (with what it
// owns in dsn's database) when the test ends; it returns the role and
// dsn connecting as it.
func role(t *testing.T, admin *pgxpool.Pool, dsn, prefix string) (string, string) {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, roles.Add(1))
	q := pgx.Identifier{name}.Sanitize()
	_, err := admin.Exec(context.Background(), "CREATE ROLE "+q+" LOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP OWNED BY "+q+" CASCADE")
		admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+q)
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(name)
	return name, u.String()
}

func superuser(t *testing.T, p *pgxpool.Pool, role string) bool {
	t.Helper()
	var super bool
	require.NoError(t, p.QueryRow(context.Background(), `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, role).Scan(&super))
	return super
}

// A database's owner plants schema shardid with the host's record and a
// statement trigger that would make it a superuser: the check refuses
// it, names the schema and its owner, and nothing runs.
func TestPlantedSchemaRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	admin := pgtest.Pool(t, dsn)
	app, appDSN := role(t, admin, dsn, "app")
	_, err := admin.Exec(ctx, `GRANT CREATE ON DATABASE `+pgx.Identifier{admin.Config().ConnConfig.Database}.Sanitize()+` TO `+app)
	require.NoError(t, err)
	planter := pgtest.Pool(t, appDSN)
	_, err = planter.Exec(ctx, fmt.Sprintf(`
CREATE SCHEMA shardid;
CREATE TABLE shardid.host_info (id bool PRIMARY KEY DEFAULT true, cluster text, host text);
CREATE FUNCTION shardid.promote() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN ALTER ROLE %s SUPERUSER; RETURN NULL; END$$;
CREATE TRIGGER promote AFTER INSERT OR UPDATE ON shardid.host_info FOR EACH STATEMENT EXECUTE FUNCTION shardid.promote();`, app))
	require.NoError(t, err)

	conn, err := admin.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	err = pgtrust.EnsureSchema(ctx, conn.Conn(), "shardid")
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	var ue *pgtrust.UntrustedError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "schema shardid", ue.Findings[0].Object)
	require.Equal(t, app, ue.Findings[0].Owner)
	require.Contains(t, err.Error(), "schema shardid belongs to "+app)
	require.Contains(t, err.Error(), "DROP SCHEMA shardid CASCADE")
	require.Contains(t, err.Error(), "table shardid.host_info")
	objects := map[string]bool{}
	for _, f := range ue.Findings {
		objects[f.Object] = true
	}
	require.True(t, objects["trigger promote on shardid.host_info"], "%v", ue.Findings)
	require.True(t, objects["function shardid.promote()"], "%v", ue.Findings)
	require.False(t, superuser(t, admin, app))

	// Owned by the toolkit, with the planter's trigger on its table:
	// still refused, naming the trigger.
	_, err = admin.Exec(ctx, `DROP SCHEMA shardid CASCADE; CREATE SCHEMA shardid;
		CREATE TABLE shardid.local_shards (shard int PRIMARY KEY);
		GRANT USAGE ON SCHEMA shardid TO `+app+`; GRANT TRIGGER ON shardid.local_shards TO `+app+`;
		CREATE SCHEMA mine AUTHORIZATION `+app)
	require.NoError(t, err)
	_, err = planter.Exec(ctx, fmt.Sprintf(`
CREATE FUNCTION mine.promote() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN ALTER ROLE %s SUPERUSER; RETURN NULL; END$$;
CREATE TRIGGER promote AFTER INSERT ON shardid.local_shards FOR EACH STATEMENT EXECUTE FUNCTION mine.promote();`, app))
	require.NoError(t, err)
	err = pgtrust.Check(ctx, admin, "shardid")
	require.ErrorAs(t, err, &ue)
	require.Len(t, ue.Findings, 1)
	require.Equal(t, pgtrust.Finding{Object: "trigger promote on shardid.local_shards", Owner: app, Fix: "DROP TRIGGER promote ON shardid.local_shards"}, ue.Findings[0])
	require.False(t, superuser(t, admin, app))

	_, err = admin.Exec(ctx, `DROP TRIGGER promote ON shardid.local_shards`)
	require.NoError(t, err)
	require.NoError(t, pgtrust.Check(ctx, admin, "shardid"))
	require.NoError(t, pgtrust.Check(ctx, admin, "missing"), "a schema that does not exist passes")

	// CREATE on the toolkit's schema for another role: refused.
	_, err = admin.Exec(ctx, `GRANT CREATE ON SCHEMA shardid TO `+app)
	require.NoError(t, err)
	err = pgtrust.Check(ctx, admin, "shardid")
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "CREATE on schema shardid", ue.Findings[0].Object)
	require.Equal(t, "REVOKE CREATE ON SCHEMA shardid FROM "+app, ue.Findings[0].Fix)
}

// A shard schema holds the application's tables too: only the schema's
// owner and the toolkit's objects named are checked.
func TestShardSchemaChecksNamedObjects(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	admin := pgtest.Pool(t, dsn)
	app, appDSN := role(t, admin, dsn, "app")
	_, err := admin.Exec(ctx, `CREATE SCHEMA shard_0000; CREATE TABLE shard_0000.schema_version (version int4 NOT NULL);
		CREATE SCHEMA fns AUTHORIZATION `+app+`;
		GRANT ALL ON SCHEMA shard_0000 TO `+app+`; GRANT ALL ON ALL TABLES IN SCHEMA shard_0000 TO `+app)
	require.NoError(t, err)
	planter := pgtest.Pool(t, appDSN)
	_, err = planter.Exec(ctx, `CREATE TABLE shard_0000.likes (id bigint)`)
	require.NoError(t, err)
	require.NoError(t, pgtrust.CheckNamed(ctx, admin, []string{"shard_0000"}, "schema_version", "schema_version_failure", "next_id"))

	_, err = planter.Exec(ctx, fmt.Sprintf(`
CREATE FUNCTION fns.promote() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN ALTER ROLE %s SUPERUSER; RETURN NULL; END$$;
CREATE TRIGGER promote AFTER UPDATE ON shard_0000.schema_version FOR EACH STATEMENT EXECUTE FUNCTION fns.promote();`, app))
	require.NoError(t, err)
	err = pgtrust.CheckNamed(ctx, admin, []string{"shard_0000"}, "schema_version", "schema_version_failure", "next_id")
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.Contains(t, err.Error(), "trigger promote on shard_0000.schema_version belongs to "+app)

	// A shard schema another role created is refused for its owner.
	_, err = admin.Exec(ctx, `CREATE SCHEMA shard_0001 AUTHORIZATION `+app)
	require.NoError(t, err)
	err = pgtrust.CheckNamed(ctx, admin, []string{"shard_0000", "shard_0001", "shard_0002"}, "schema_version")
	require.ErrorIs(t, err, pgtrust.ErrUntrusted)
	require.Contains(t, err.Error(), "schema shard_0001 belongs to "+app)
	require.False(t, superuser(t, admin, app))
}

// A toolkit that logs in as a role of its own trusts what that role and
// the superusers own, and nothing of a third role.
func TestNonSuperuserToolkit(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	admin := pgtest.Pool(t, dsn)
	mgr, mgrDSN := role(t, admin, dsn, "mgr")
	app, _ := role(t, admin, dsn, "app")
	_, err := admin.Exec(ctx, `GRANT CREATE ON DATABASE `+pgx.Identifier{admin.Config().ConnConfig.Database}.Sanitize()+` TO `+mgr)
	require.NoError(t, err)
	toolkit := pgtest.Pool(t, mgrDSN)
	conn, err := toolkit.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	require.NoError(t, pgtrust.EnsureSchema(ctx, conn.Conn(), "shardid"))
	require.NoError(t, pgtrust.EnsureSchema(ctx, conn.Conn(), "shardid"), "again: its own schema")
	_, err = admin.Exec(ctx, `CREATE TABLE shardid.by_superuser (x int)`)
	require.NoError(t, err)
	require.NoError(t, pgtrust.Check(ctx, toolkit, "shardid"))
	_, err = admin.Exec(ctx, `CREATE TABLE shardid.by_app (x int); ALTER TABLE shardid.by_app OWNER TO `+app)
	require.NoError(t, err)
	err = pgtrust.Check(ctx, toolkit, "shardid")
	var ue *pgtrust.UntrustedError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, mgr, ue.Role)
	require.Equal(t, []pgtrust.Finding{{Object: "table shardid.by_app", Owner: app,
		Fix: "DROP TABLE shardid.by_app (or ALTER TABLE shardid.by_app OWNER TO " + mgr + ")"}}, ue.Findings)
}

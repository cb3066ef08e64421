package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

const hostSecret = "s3cret-Hunter2"

// passwordServer starts a server of this test's own on which role
// shard_owner (a superuser) must give its password, hostSecret, while
// every other role is trusted; PGPASSWORD and ~/.pgpass are kept out of
// the test's way.
func passwordServer(t *testing.T) *localpg.Server {
	t.Helper()
	t.Setenv("PGPASSWORD", "")
	os.Unsetenv("PGPASSWORD")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	s := pgtest.Own(t, localpg.Options{})
	admin, err := pgx.Connect(clustertest.Ctx(t), s.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(clustertest.Ctx(t), `CREATE ROLE shard_owner LOGIN SUPERUSER PASSWORD '`+hostSecret+`'`)
	require.NoError(t, err)
	hba := filepath.Join(s.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hba, append([]byte("host all shard_owner 127.0.0.1/32 scram-sha-256\n"), old...), 0o600))
	_, err = admin.Exec(clustertest.Ctx(t), `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	// The rule holds: without its password the role is refused.
	c, err := pgx.Connect(clustertest.Ctx(t), fmt.Sprintf("postgres://shard_owner@127.0.0.1:%d/postgres?sslmode=disable", s.Port))
	if err == nil {
		c.Close(context.Background())
	}
	require.ErrorContains(t, err, "password authentication failed")
	return s
}

// A cluster file that gives hosts' passwords in their DSNs (URL and
// key=value) leaves none in the catalog, which every routing role reads;
// the router still connects with the password from the cluster file, and
// a router opened from the catalog alone with PGPASSWORD.
func TestCatalogHoldsNoPasswords(t *testing.T) {
	s := passwordServer(t)
	n := clustertest.DBCounter.Add(1)
	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("c%d", n), Shards: 4, Path: "test.yaml",
		Catalog: s.DSN(fmt.Sprintf("pw%d_catalog", n)),
		Hosts: []shardmgr.Host{
			{Name: "pg1", DSN: fmt.Sprintf("postgres://shard_owner:%s@127.0.0.1:%d/pw%d_app1?sslmode=disable", hostSecret, s.Port, n)},
			{Name: "pg2", DSN: fmt.Sprintf("host=127.0.0.1 port=%d dbname=pw%d_app2 user=shard_owner password='%s' sslmode=disable", s.Port, n, hostSecret)},
		}}
	require.NoError(t, cfg.ValidateCluster())
	_, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)

	// A routing role as docs/upgrading.md sets it up, not a superuser.
	cat := clustertest.Pool(t, cfg.Catalog)
	_, err = cat.Exec(clustertest.Ctx(t), `CREATE ROLE router_app LOGIN;
		GRANT USAGE ON SCHEMA shardid TO router_app;
		GRANT SELECT ON shardid.cluster, shardid.hosts, shardid.shards, shardid.catalog_migrations, shardid.catalog_readers TO router_app`)
	require.NoError(t, err)
	routerCatalog := strings.Replace(cfg.Catalog, "postgres://postgres@", "postgres://router_app@", 1)
	rows, err := clustertest.Pool(t, routerCatalog).Query(clustertest.Ctx(t), `SELECT name, dsn FROM shardid.hosts ORDER BY name`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, DSN string }])
	require.NoError(t, err)
	require.Equal(t, []struct{ Name, DSN string }{
		{"pg1", fmt.Sprintf("postgres://shard_owner@127.0.0.1:%d/pw%d_app1?sslmode=disable", s.Port, n)},
		{"pg2", fmt.Sprintf("host=127.0.0.1 port=%d dbname=pw%d_app2 user=shard_owner sslmode=disable", s.Port, n)},
	}, got)

	// The router, as the routing role, reaches the shards with the
	// passwords of the cluster file.
	rcfg := *cfg
	rcfg.Catalog = routerCatalog
	r, err := shardmgr.Open(clustertest.Ctx(t), &rcfg)
	require.NoError(t, err)
	defer r.Close()
	for id := range cfg.Shards {
		require.NoError(t, r.Tx(clustertest.Ctx(t), id, func(ctx context.Context, tx pgx.Tx, sh shardmgr.Shard) error {
			var user string
			return tx.QueryRow(ctx, `SELECT current_user`).Scan(&user)
		}), "shard %d", id)
	}
	// From the catalog alone, the password comes from the environment.
	selectOne := func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error {
		_, err := tx.Exec(ctx, `SELECT 1`)
		return err
	}
	r2, err := shardmgr.OpenCatalog(clustertest.Ctx(t), routerCatalog)
	require.NoError(t, err)
	require.ErrorContains(t, r2.Tx(clustertest.Ctx(t), 0, selectOne), "password", "the catalog gave the router a password")
	r2.Close()
	t.Setenv("PGPASSWORD", hostSecret)
	r2, err = shardmgr.OpenCatalog(clustertest.Ctx(t), routerCatalog)
	require.NoError(t, err)
	require.NoError(t, r2.Tx(clustertest.Ctx(t), 0, selectOne))
	r2.Close()

	// init again finds the catalog as the file says: nothing to change.
	gen := readGeneration(t, cfg)
	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.Equal(t, gen, readGeneration(t, cfg))
}

func readGeneration(t *testing.T, cfg *shardmgr.Config) int64 {
	t.Helper()
	var gen int64
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t), `SELECT generation FROM shardid.cluster`).Scan(&gen))
	return gen
}

// A catalog that a binary of schema 12 wrote, DSNs with their passwords,
// loses them when init upgrades it; the SQL of migration 14 strips what
// StripPassword strips for the spellings people write.
func TestCatalogUpgradeStripsPasswords(t *testing.T) {
	cfg := initCluster(t, 4)
	cat := clustertest.Pool(t, cfg.Catalog)
	require.NoError(t, migrations.To(clustertest.Ctx(t), cfg.Catalog, migrations.Catalog, 12))
	dsns := []string{
		"postgres://app:" + hostSecret + "@db1:5432/a1?sslmode=disable",
		"postgresql://app:" + hostSecret + "@db1,db2:5433/a2",
		"postgres://app:p%40" + hostSecret + "@db1/a3",
		"postgres://app:${PG_PASSWORD}@db1/a4",
		"postgres://app@db1/a5?password=" + hostSecret,
		"postgres://app@db1/a6?password=" + hostSecret + "&sslmode=disable",
		"postgres://app@db1/a7?sslmode=require&sslpassword=" + hostSecret + "&password=" + hostSecret + "&application_name=x",
		"postgres://app:" + hostSecret + "@db1/a8?password=${PW}",
		"host=db1 user=app password=" + hostSecret + " dbname=a9",
		"password=" + hostSecret + " host=db1 dbname=a10",
		"host=db1 dbname=a11 password = '" + hostSecret + " x\\'y'",
		"host=db1 dbname=a12 password=${PW}",
		"host=db1 dbname=a13 passfile=/p",
	}
	for i, dsn := range dsns {
		_, err := cat.Exec(clustertest.Ctx(t), `INSERT INTO shardid.hosts (name, dsn, added_generation) VALUES ($1, $2, 1)`, fmt.Sprintf("x%d", i), dsn)
		require.NoError(t, err)
	}
	for _, h := range cfg.Hosts { // as the old init wrote them
		_, err := cat.Exec(clustertest.Ctx(t), `UPDATE shardid.hosts SET dsn = $2 WHERE name = $1`, h.Name,
			strings.Replace(h.DSN, "postgres://postgres@", "postgres://postgres:"+hostSecret+"@", 1))
		require.NoError(t, err)
	}
	require.NoError(t, migrations.Up(clustertest.Ctx(t), cfg.Catalog, migrations.Catalog))
	for i, dsn := range dsns {
		var got string
		require.NoError(t, cat.QueryRow(clustertest.Ctx(t), `SELECT dsn FROM shardid.hosts WHERE name = $1`, fmt.Sprintf("x%d", i)).Scan(&got))
		require.Equal(t, pg.StripPassword(dsn), got, dsn)
	}
	_, err := cat.Exec(clustertest.Ctx(t), `DELETE FROM shardid.hosts WHERE name LIKE 'x%'`)
	require.NoError(t, err)
	var leaked int
	require.NoError(t, cat.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM shardid.hosts WHERE strpos(dsn, $1) > 0`, hostSecret).Scan(&leaked))
	require.Zero(t, leaked)
	// What the migration left is what init records: nothing to change.
	gen := readGeneration(t, cfg)
	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.Equal(t, gen, readGeneration(t, cfg))
}

// init says so when every role may connect to the catalog database (any
// of them could hold the catalog's locks), and stops saying so once
// CONNECT is PUBLIC's no more.
func TestInitWarnsWhenPublicMayConnectToCatalog(t *testing.T) {
	cfg := clustertest.Cluster(t, 2, false)
	res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	cat := clustertest.Pool(t, cfg.Catalog)
	var db string
	require.NoError(t, cat.QueryRow(clustertest.Ctx(t), `SELECT current_database()`).Scan(&db))
	// Besides, on a major without the C generator, auto's fallback (one line a host).
	fallback := generatorFallbackWarnings(t, cfg)
	require.Len(t, res.Warnings, len(fallback)+1)
	require.Subset(t, res.Warnings, fallback)
	public := res.Warnings[len(res.Warnings)-1]
	require.Contains(t, public, "every role may connect to the catalog database "+db)
	require.Contains(t, public, "REVOKE CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM PUBLIC")

	_, err = cat.Exec(clustertest.Ctx(t), "REVOKE CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM PUBLIC")
	require.NoError(t, err)
	res, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.ElementsMatch(t, fallback, res.Warnings)
}

// A router opened from the catalog alone (OpenCatalog) reads the hosts'
// DSNs the catalog records, whose password the cluster file wrote as a
// ${VAR}: WithLookupEnv resolves it, and the router connects with what
// the lookup gives. Without the option the router says which variable
// it needs and where to give it; with a lookup that gives a wrong
// password, the server refuses it (the lookup's value is the one used).
func TestRouterFromCatalogResolvesDSNVariables(t *testing.T) {
	s := passwordServer(t)
	n := clustertest.DBCounter.Add(1)
	const pwVar = "SHARDID_TEST_HOST_PASSWORD"
	lookup := func(secret string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if name == pwVar {
				return secret, true
			}
			return "", false
		}
	}
	file := fmt.Sprintf(`cluster: c%[1]d
shards: 4
catalog: %[2]s
hosts:
  - name: pg1
    dsn: postgres://shard_owner:${%[3]s}@127.0.0.1:%[4]d/pw%[1]d_app1?sslmode=disable
  - name: pg2
    dsn: host=127.0.0.1 port=%[4]d dbname=pw%[1]d_app2 user=shard_owner password=${%[3]s} sslmode=disable
`, n, s.DSN(fmt.Sprintf("pw%d_catalog", n)), pwVar, s.Port)
	cfg, err := shardmgr.ParseConfig([]byte(file), "test.yaml", lookup(hostSecret))
	require.NoError(t, err)
	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	var recorded string
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t),
		`SELECT dsn FROM shardid.hosts WHERE name = 'pg1'`).Scan(&recorded))
	require.Contains(t, recorded, "${"+pwVar+"}", "the catalog records the variable, not its value")
	require.NotContains(t, recorded, hostSecret)

	// route opens a router from the catalog with opts and runs a
	// transaction on every shard; the first error, else nil.
	route := func(opts ...shardmgr.RouterOption) error {
		r, err := shardmgr.OpenCatalog(clustertest.Ctx(t), cfg.Catalog, append(opts, shardmgr.WithRefreshInterval(0))...)
		if err != nil {
			return err
		}
		defer r.Close()
		for id := range cfg.Shards {
			if err := r.Tx(clustertest.Ctx(t), id, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error {
				_, err := tx.Exec(ctx, `SELECT 1`)
				return err
			}); err != nil {
				return fmt.Errorf("shard %d: %w", id, err)
			}
		}
		return nil
	}
	err = route()
	require.ErrorContains(t, err, "DSN needs ${"+pwVar+"} (see WithLookupEnv)")
	err = route(shardmgr.WithLookupEnv(lookup("not-the-password")))
	require.ErrorContains(t, err, "password authentication failed")
	require.NoError(t, route(shardmgr.WithLookupEnv(lookup(hostSecret))))
}

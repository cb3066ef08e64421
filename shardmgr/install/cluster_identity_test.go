package install

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// hostsState is what init must leave alone on every host when it
// refuses: the schemas of each host's database and its record.
func hostsState(t *testing.T, cfg *shardmgr.Config) string {
	t.Helper()
	var b strings.Builder
	for _, h := range cfg.Hosts {
		p := clustertest.Pool(t, h.DSN)
		rows, err := p.Query(clustertest.Ctx(t), `SELECT nspname FROM pg_namespace
			WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' ORDER BY 1`)
		require.NoError(t, err)
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		var info, shards string
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT row(cluster, host, cluster_identity)::text FROM shardid.host_info`).Scan(&info))
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT string_agg(row(shard, schema_name, state, generation)::text, ',' ORDER BY shard) FROM shardid.local_shards`).Scan(&shards))
		fmt.Fprintf(&b, "%s: %v %s %s\n", h.Name, schemas, info, shards)
	}
	return b.String()
}

// databaseExists reports whether database name exists on the server of
// dsn.
func databaseExists(t *testing.T, dsn, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, clustertest.Pool(t, dsn).QueryRow(clustertest.Ctx(t), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&ok))
	return ok
}

// TestInitRefusesACatalogThatIsNotTheHosts: init with a mistyped catalog
// database name (shardid_catalgo), with a catalog database left empty by
// a failed restore, and with another catalog of the same cluster name is
// refused before it creates anything: no database, no schema, every
// host's schemas and record unchanged. Before, the first two created a
// new cluster and live generators beside the hosts' shards, the third
// took the hosts over (failed before).
func TestInitRefusesACatalogThatIsNotTheHosts(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initCluster(t, 6)
	cat := clustertest.Pool(t, cfg.Catalog)
	var identity string
	require.NoError(t, cat.QueryRow(ctx, `SELECT identity::text FROM shardid.cluster`).Scan(&identity))
	require.Len(t, identity, 36)
	before := hostsState(t, cfg)
	require.Equal(t, 3, strings.Count(before, identity), "every host records the catalog's identity: %s", before)
	pc, err := pgconn.ParseConfig(cfg.Catalog)
	require.NoError(t, err)
	server := pgtest.Servers(t, 1)[0]

	try := func(catalogDB string, is error, says string) {
		t.Helper()
		other := *cfg
		other.Catalog = strings.Replace(cfg.Catalog, "/"+pc.Database+"?", "/"+catalogDB+"?", 1)
		require.NotEqual(t, cfg.Catalog, other.Catalog)
		_, err := Init(ctx, clustertest.Handle(t, &other), InitOptions{})
		require.ErrorIs(t, err, is)
		require.ErrorContains(t, err, says)
		require.NotContains(t, err.Error(), "\n")
		require.Equal(t, before, hostsState(t, cfg), "a host changed")
	}

	// The typo: no database is created.
	typo := strings.Replace(pc.Database, "catalog", "catalgo", 1)
	clustertest.DropLater(t, server, typo)
	try(typo, ErrCatalogEmpty, fmt.Sprintf("the catalog database 127.0.0.1:%d/%s does not exist, but host pg1 records 2 shards of cluster %q (identity %s)", pc.Port, typo, cfg.Cluster, identity))
	require.False(t, databaseExists(t, cfg.Catalog, typo), "init created the mistyped catalog database")

	// An empty database where the catalog's restore failed: nothing is
	// created in it.
	empty := pc.Database + "_empty"
	clustertest.DropLater(t, server, empty)
	_, err = server.CreateDatabase(ctx, empty)
	require.NoError(t, err)
	try(empty, ErrCatalogEmpty, "holds no cluster, but host pg1 records 2 shards")
	var schema bool
	require.NoError(t, clustertest.Pool(t, server.DSN(empty)).QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'shardid')`).Scan(&schema))
	require.False(t, schema, "init wrote into the empty catalog database")

	// Another catalog of a cluster of the same name (initialised with
	// hosts of its own): its identity is not the hosts'.
	second := clustertest.Cluster(t, 6, false)
	second.Cluster = cfg.Cluster
	_, err = Init(ctx, clustertest.Handle(t, second), InitOptions{})
	require.NoError(t, err)
	spc, err := pgconn.ParseConfig(second.Catalog)
	require.NoError(t, err)
	genBefore := readGeneration(t, second)
	try(spc.Database, ErrOtherCatalog, "but host pg1 records cluster")
	require.Equal(t, genBefore, readGeneration(t, second), "the other catalog changed")

	// The right catalog: init runs, nothing to do.
	res, err := Init(ctx, clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.False(t, res.Changed(), "%+v", res)
	require.Equal(t, before, hostsState(t, cfg))
}

// TestHostSecretsReadableByTheToolkitOnly: the hash of each host's secret
// in the catalog, and the secret in each host's database, are refused to
// a routing role granted what docs/upgrading.md says and to an
// application role granted what docs/operations.md says (and every table
// of the shard schemas); the toolkit's role reads both, and they match.
func TestHostSecretsReadableByTheToolkitOnly(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initCluster(t, 3)
	role := clustertest.Role(t, cfg, "app")
	q := pgx.Identifier{role}.Sanitize()
	_, err := clustertest.Pool(t, cfg.Catalog).Exec(ctx, `GRANT USAGE ON SCHEMA shardid TO `+q+`;
		GRANT SELECT ON shardid.cluster, shardid.hosts, shardid.shards, shardid.catalog_migrations, shardid.catalog_readers TO `+q)
	require.NoError(t, err)
	refused := func(dsn, sql string) {
		t.Helper()
		var v []byte
		err := clustertest.Pool(t, clustertest.AsRole(t, dsn, role)).QueryRow(ctx, sql).Scan(&v)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe, sql)
		require.Equal(t, pgerrcode.InsufficientPrivilege, pe.Code, "%s: %v", sql, err)
	}
	refused(cfg.Catalog, `SELECT secret_sha256 FROM shardid.host_secrets LIMIT 1`)
	for i, h := range cfg.Hosts {
		_, err := clustertest.Pool(t, h.DSN).Exec(ctx, fmt.Sprintf(`GRANT USAGE ON SCHEMA shardid TO %[1]s; GRANT SELECT ON shardid.local_shards, shardid.host_info TO %[1]s;
			GRANT USAGE ON SCHEMA shard_%04[2]d TO %[1]s; GRANT ALL ON ALL TABLES IN SCHEMA shard_%04[2]d TO %[1]s`, q, i))
		require.NoError(t, err)
		refused(h.DSN, `SELECT secret FROM shardid.host_secret`)

		var secret, hash []byte
		require.NoError(t, clustertest.Pool(t, h.DSN).QueryRow(ctx, `SELECT secret FROM shardid.host_secret`).Scan(&secret))
		require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(ctx, `SELECT secret_sha256 FROM shardid.host_secrets WHERE host = $1`, h.Name).Scan(&hash))
		require.Len(t, secret, 32)
		require.Equal(t, hash, sha256Of(secret), h.Name)
	}
}

func sha256Of(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

package install

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
	shsql "github.com/shardid/shardid/sql"
)

// generator: c makes init create the extension on every host and install
// the C generator; changing the cluster file's generator and running init
// again switches every shard, on the same counter: ids keep increasing and
// verify (deep: no stored id twice) passes and names the generator each
// shard runs.
func TestInitSwitchesGenerators(t *testing.T) {
	t.Parallel()
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 6, false)
	var last int64
	for i, gen := range []string{shsql.GeneratorC, shsql.GeneratorPLpgSQL, shsql.GeneratorAuto} {
		cfg.Generator = gen
		_, err := Init(ctx, clustertest.Handle(t, cfg), InitOptions{})
		require.NoError(t, err, gen)
		want := gen
		if gen == shsql.GeneratorAuto {
			want = shsql.GeneratorC // the extension init created for c is there
		}
		rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{Deep: true})
		require.NoError(t, err)
		require.True(t, rep.OK, "verify after %s: %v", gen, rep.Problems)
		require.Equal(t, []verify.GeneratorCount{{Kind: want, Count: 6, Shards: "0-5"}}, rep.Generators, gen)

		pool := clustertest.HostPool(t, cfg, "pg1")
		if i == 0 {
			_, err = pool.Exec(ctx, "CREATE TABLE shard_0000.likes (id bigint PRIMARY KEY DEFAULT shard_0000.next_id(), v int)")
			require.NoError(t, err)
		}
		var lo, hi int64
		require.NoError(t, pool.QueryRow(ctx, `WITH ins AS (INSERT INTO shard_0000.likes (v) SELECT g FROM generate_series(1, 5000) g RETURNING id)
			SELECT min(id), max(id) FROM ins`).Scan(&lo, &hi))
		require.Greater(t, lo, last, "ids after the switch to %s follow the ones before", gen)
		last = hi
	}
}

// generator c is refused before init changes anything (no database is
// created) where it cannot be installed: through a role that is not a
// superuser (even one that may create databases), and on a server that
// does not offer the extension (another major: make test runs this on
// 14 to 18, scripts/test-versions). There, auto installs the PL/pgSQL
// generator and one warning says why; where the extension is offered,
// auto warns nothing.
func TestInitChecksTheCGeneratorFirst(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 3, false)
	role := clustertest.Role(t, cfg, "managed")
	for _, s := range pgtest.Servers(t, 3) {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" CREATEDB")
		conn.Close(ctx)
		require.NoError(t, err)
	}
	dbExists := func(dsn string) bool {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		name := strings.TrimPrefix(u.Path, "/")
		u.Path = "/postgres"
		conn, err := pgx.Connect(ctx, u.String())
		require.NoError(t, err)
		defer conn.Close(ctx)
		var ok bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&ok))
		return ok
	}
	requireNothingCreated := func() {
		t.Helper()
		require.False(t, dbExists(cfg.Catalog), "catalog database created")
		for _, h := range cfg.Hosts {
			require.False(t, dbExists(h.DSN), "%s's database created", h.Name)
		}
	}

	managed := *cfg
	managed.Hosts = nil
	for _, h := range cfg.Hosts {
		h.DSN = clustertest.AsRole(t, h.DSN, role)
		managed.Hosts = append(managed.Hosts, h)
	}
	managed.Generator = shsql.GeneratorC
	_, err := Init(ctx, clustertest.Handle(t, &managed), InitOptions{})
	require.ErrorIs(t, err, ErrNoCGenerator)
	require.ErrorContains(t, err, "host pg1: the C generator cannot be installed: the host's role is not a superuser")
	requireNothingCreated()

	conn, err := pgx.Connect(ctx, pgtest.Servers(t, 1)[0].DSN("postgres"))
	require.NoError(t, err)
	var offered bool
	var version string
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_available_extension_versions WHERE name = $1 AND version = $2),
		current_setting('server_version')`, shsql.ExtensionName, shsql.ExtensionVersion).Scan(&offered, &version))
	conn.Close(ctx)
	if !offered {
		cfg.Generator = shsql.GeneratorC
		_, err = Init(ctx, clustertest.Handle(t, cfg), InitOptions{})
		require.ErrorIs(t, err, ErrNoCGenerator)
		require.ErrorContains(t, err, "host pg1: the C generator cannot be installed: its server (PostgreSQL "+version+") does not offer the shardid extension "+shsql.ExtensionVersion)
		requireNothingCreated()
	}

	cfg.Generator = shsql.GeneratorAuto
	res, err := Init(ctx, clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	var generatorWarnings []string
	for _, w := range res.Warnings {
		if strings.Contains(w, "generator auto") {
			generatorWarnings = append(generatorWarnings, w)
		}
	}
	if offered {
		require.Empty(t, generatorWarnings)
		return
	}
	require.Equal(t, []string{
		"host pg1: generator auto installs the PL/pgSQL generator: its server (PostgreSQL " + version + ") does not offer the shardid extension " + shsql.ExtensionVersion,
		"host pg2: generator auto installs the PL/pgSQL generator: its server (PostgreSQL " + version + ") does not offer the shardid extension " + shsql.ExtensionVersion,
		"host pg3: generator auto installs the PL/pgSQL generator: its server (PostgreSQL " + version + ") does not offer the shardid extension " + shsql.ExtensionVersion,
	}, generatorWarnings)
	rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.Equal(t, []verify.GeneratorCount{{Kind: verify.GeneratorPLpgSQL, Count: 3, Shards: "0-2"}}, rep.Generators)
}

// generatorFallbackWarnings is what init rightly warns on a major the C
// generator is not built for (scripts/test-versions: no server headers of
// that major here): generator auto installs PL/pgSQL, one line a host
// (TestInitChecksTheCGeneratorFirst). On Debian's 15, where the extension
// is installed, nothing.
func generatorFallbackWarnings(t *testing.T, cfg *shardmgr.Config) []string {
	t.Helper()
	var out []string
	for _, h := range cfg.Hosts {
		var available bool
		var version string
		require.NoError(t, clustertest.HostPool(t, cfg, h.Name).QueryRow(clustertest.Ctx(t),
			`SELECT EXISTS (SELECT FROM pg_catalog.pg_available_extension_versions WHERE name = 'shardid' AND version = $1),
			current_setting('server_version')`, shsql.ExtensionVersion).Scan(&available, &version))
		if !available {
			out = append(out, "host "+h.Name+": generator auto installs the PL/pgSQL generator: its server (PostgreSQL "+version+") does not offer the shardid extension "+shsql.ExtensionVersion)
		}
	}
	return out
}

package migrate_test

import (
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

// buildCLI builds the command pkg of the modules pinned in go.mod into dir
// and returns its path: the test runs the real tools users run.
func buildCLI(t *testing.T, dir, name, pkg string, tags ...string) string {
	t.Helper()
	goBin, err := osexec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := osexec.Command(goBin, append(args, pkg)...)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, b)
	return out
}

// run runs a CLI in an empty directory (no tern.conf is picked up) and
// returns its combined output.
func runCLI(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := osexec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", filepath.Base(bin), strings.Join(args, " "), b)
	return string(b)
}

// The rendered files run unchanged under tern's and golang-migrate's own
// CLIs, including SQL whose first rendering produced "{{" (an escaped
// two-dimensional array literal), which the tern CLI reads as a template
// a second time.
func TestRenderedMigrationsRunUnderTheRealCLIs(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	tern := buildCLI(t, bin, "tern", "github.com/jackc/tern/v2")
	gm := buildCLI(t, bin, "migrate", "github.com/golang-migrate/migrate/v4/cmd/migrate", "postgres")

	set := setOf(t, map[string]string{
		"001_grid.sql": `-- {{"{{- not an action -}}"}}
CREATE TABLE {{.schema}}.grid (
    id    bigint PRIMARY KEY DEFAULT {{.next_id}},
    cells int[] NOT NULL DEFAULT '{{"{{"}}1,2{{"}}"}}'
);
COMMENT ON TABLE {{.schema}}.grid IS 'starts at {{"{{{"}}1}}} and {{"{{"}}.schema}}';

---- create above / drop below ----

DROP TABLE {{.schema}}.grid;
`,
	})
	migs, err := set.Render(5, "shard_0005")
	require.NoError(t, err)
	require.Contains(t, migs[0].Up, `'{{1,2}}'`)

	server := pgtest.Servers(t, 1)[0]
	newShardDB := func() string {
		dsn := pgtest.NewDB(t, server)
		ddl, err := shsql.Render(shsql.Params{Shard: 5})
		require.NoError(t, err)
		_, err = clustertest.Pool(t, dsn).Exec(clustertest.Ctx(t), ddl, pgx.QueryExecModeSimpleProtocol)
		require.NoError(t, err)
		return dsn
	}
	check := func(dsn string) {
		t.Helper()
		p := clustertest.Pool(t, dsn)
		var cells, comment string
		var id int64
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), `INSERT INTO shard_0005.grid DEFAULT VALUES RETURNING id, cells::text`).Scan(&id, &cells))
		require.Equal(t, "{{1,2}}", cells)
		require.Equal(t, 5, defaultShardOf(id))
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT obj_description('shard_0005.grid'::regclass, 'pg_class')`).Scan(&comment))
		require.Equal(t, "starts at {{{1}}} and {{.schema}}", comment)
	}

	t.Run("tern", func(t *testing.T) {
		out := t.TempDir()
		_, err := migrate.WriteRendered(out, migrate.FormatTern, migs)
		require.NoError(t, err)
		dsn := newShardDB()
		runCLI(t, tern, "migrate", "--migrations", out, "--conn-string", dsn, "--version-table", "shard_0005.schema_version")
		check(dsn)
		v, _, err := migrate.ReadShardVersion(clustertest.Ctx(t), clustertest.Pool(t, dsn), "shard_0005")
		require.NoError(t, err)
		require.Equal(t, 1, v)
		runCLI(t, tern, "migrate", "--migrations", out, "--conn-string", dsn, "--version-table", "shard_0005.schema_version", "--destination", "0")
		require.False(t, clustertest.TableExists(t, clustertest.Pool(t, dsn), "shard_0005.grid"))
	})

	t.Run("golang-migrate", func(t *testing.T) {
		out := t.TempDir()
		_, err := migrate.WriteRendered(out, migrate.FormatGolangMigrate, migs)
		require.NoError(t, err)
		dsn := newShardDB()
		// The command docs/migrations.md gives, for the usual
		// -tags 'postgres' build: postgres://, the version table quoted
		// into the shard's schema.
		url := dsn + "&x-migrations-table=%22shard_0005%22.%22schema_migrations%22&x-migrations-table-quoted=1"
		runCLI(t, gm, "-path", out, "-database", url, "up")
		check(dsn)
		require.True(t, clustertest.TableExists(t, clustertest.Pool(t, dsn), "shard_0005.schema_migrations"))
		require.False(t, clustertest.TableExists(t, clustertest.Pool(t, dsn), "public.schema_migrations"))
		runCLI(t, gm, "-path", out, "-database", url, "down", "-all")
		require.False(t, clustertest.TableExists(t, clustertest.Pool(t, dsn), "shard_0005.grid"))
	})
}

package migrate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/migrate"
)

// A migration is rendered wherever `migrate render` runs (a pull
// request's check, with the CI's secrets in its environment): it may call
// no function that reads the environment or the network, whether in a
// migration, a shared template or a snapshot, and whether or not it is
// ever executed.
func TestMigrationTemplatesCannotReadEnvironmentOrNetwork(t *testing.T) {
	t.Setenv("SHARDID_TEST_SECRET", "hunter2")
	for _, c := range []struct{ fn, call string }{
		{"env", `{{ env "SHARDID_TEST_SECRET" }}`},
		{"expandenv", `{{ expandenv "$SHARDID_TEST_SECRET" }}`},
		{"getHostByName", `{{ getHostByName "example.com" }}`},
		{"env", `{{ if false }}{{ env "HOME" }}{{ end }}`},
		{"now", `{{ now }}`},
		{"randAlphaNum", `{{ randAlphaNum 8 }}`},
	} {
		call := c.call
		for _, files := range []map[string]string{
			{"001_a.sql": "COMMENT ON SCHEMA {{.schema}} IS '" + call + "';"},
			{"001_a.sql": `{{ template "shared/c.sql" . }}`, "shared/c.sql": "SELECT '" + call + "';"},
			{"001_a.sql": `{{ install_snapshot "s" }}`, "snapshots/s/install.sql": "SELECT '" + call + "';"},
		} {
			set, err := migrate.LoadMigrationSet(mapFS(files))
			require.Nil(t, set, "%s: %v", call, files)
			require.ErrorIs(t, err, migrate.ErrMigrationSet)
			require.ErrorContains(t, err, `function "`+c.fn+`" not defined`)
			require.ErrorContains(t, err, "docs/migrations.md")
			require.NotContains(t, err.Error(), "hunter2")
		}
	}

	// What migrations do use still renders, the same as tern would.
	set := setOf(t, map[string]string{
		"001_a.sql": `SELECT {{ printf "%q" (upper .schema) }}, {{ add .shard_id 1 }}, {{ join "," (list "a" "b") }}, {{ squote (trimPrefix "shard_" .schema) }}, {{ default "x" "" }}, {{ sha256sum "a" | trunc 8 }};`,
	})
	migs, err := set.Render(3, "shard_0003")
	require.NoError(t, err)
	require.Equal(t, `SELECT "SHARD_0003", 4, a,b, '0003', x, ca978112;`, migs[0].Up)
}

// The list in the docs is the list in the code.
func TestTemplateFuncsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "migrations.md"))
	require.NoError(t, err)
	for _, name := range migrate.TemplateFuncs() {
		require.Regexp(t, "`"+regexp.QuoteMeta(name)+"`", string(doc), "docs/migrations.md must list %s", name)
	}
	for _, name := range []string{"env", "expandenv", "getHostByName", "now", "uuidv4", "osBase", "genPrivateKey", "randBytes"} {
		require.False(t, slices.Contains(migrate.TemplateFuncs(), name), name)
	}
}

// A symbolic link under the migrations directory that leads out of it
// is refused, whether a migration, a shared template or a snapshot; one
// that stays inside works.
func TestMigrationDirRefusesSymlinksOutside(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.sql")
	require.NoError(t, os.WriteFile(secret, []byte("SELECT 'hunter2';"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "s"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "s", "install.sql"), []byte("SELECT 'hunter2';"), 0o644))
	for _, link := range []struct{ name, target string }{
		{"002_passwd.sql", "/etc/passwd"},
		{"002_secret.sql", secret},
		{"002_rel.sql", ""}, // a relative link that climbs out
		{"shared/secret.sql", secret},
		{"snapshots", outside},
	} {
		dir := filepath.Join(t.TempDir(), "migrations")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "shared"), 0o755))
		body := "SELECT 1;"
		if link.name == "snapshots" {
			body = `{{ install_snapshot "s" }}`
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "001_a.sql"), []byte(body), 0o644))
		target := link.target
		if target == "" {
			rel, err := filepath.Rel(dir, secret)
			require.NoError(t, err)
			target = rel
		}
		require.NoError(t, os.Symlink(target, filepath.Join(dir, link.name)))
		set, err := migrate.LoadMigrationDir(dir)
		if err == nil {
			_, err = set.Render(0, "shard_0000")
		}
		require.Error(t, err, link.name)
		require.ErrorIs(t, err, migrate.ErrMigrationSet)
		require.ErrorContains(t, err, "outside the migrations directory", link.name)
		require.NotContains(t, err.Error(), "hunter2")
		require.NotContains(t, err.Error(), "root:")
	}

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "shared"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shared", "t.sql"), []byte("SELECT 2;"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "001_a.sql"), []byte("SELECT 1;"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join("shared", "t.sql"), filepath.Join(dir, "002_b.sql")))
	set, err := migrate.LoadMigrationDir(dir)
	require.NoError(t, err)
	migs, err := set.Render(0, "shard_0000")
	require.NoError(t, err)
	require.Equal(t, "SELECT 2;", migs[1].Up)
}

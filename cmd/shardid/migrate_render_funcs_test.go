package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// `migrate render` is what a pull request's check runs, with the CI's
// secrets in its environment: a migration that reads the environment, the
// network or a file outside its directory fails to render, naming what it
// called, and prints nothing of the secret.
func TestMigrateRenderRefusesEnvNetworkAndOutsideFiles(t *testing.T) {
	t.Setenv("SHARDID_CONFIG", "")
	t.Setenv("SHARDID_TEST_CI_SECRET", "hunter2-ci")
	t.Chdir(t.TempDir())
	for _, c := range []struct{ body, msg string }{
		{`COMMENT ON SCHEMA {{.schema}} IS '{{ env "SHARDID_TEST_CI_SECRET" }}';`, `function "env" not defined`},
		{`COMMENT ON SCHEMA {{.schema}} IS '{{ expandenv "$SHARDID_TEST_CI_SECRET" }}';`, `function "expandenv" not defined`},
		{`COMMENT ON SCHEMA {{.schema}} IS '{{ getHostByName "hunter2-ci.example.com" }}';`, `function "getHostByName" not defined`},
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "001_a.sql"), []byte(c.body), 0o644))
		out, code := runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "5")
		require.Equal(t, 1, code, out)
		require.Contains(t, out, c.msg)
		require.Contains(t, out, "docs/migrations.md")
		require.NotContains(t, out, "hunter2-ci\n")
		require.NotContains(t, out, "IS 'hunter2-ci'")
	}

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "001_a.sql"), []byte("SELECT 1;"), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "002_b.sql")))
	out, code := runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "5")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "002_b.sql")
	require.Contains(t, out, "outside the migrations directory")
	require.NotContains(t, out, "root:")
}

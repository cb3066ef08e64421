package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// The cluster file names the migrations directory relative to itself;
// init, migrate, rebalance apply and shard move use it without --dir, and
// --dir wins over it.
func TestMigrationsDirFromClusterFile(t *testing.T) {
	path, _ := clusterFile(t, 6)
	// The file and its migrations in a directory of their own; the tests
	// run in cmd/shardid, so ./migrations resolved against the working
	// directory would not exist.
	home := filepath.Dir(path)
	mig := filepath.Join(home, "migrations")
	require.NoError(t, os.Mkdir(mig, 0o755))
	src := filepath.Join("..", "..", "testdata", "migrations")
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(mig, e.Name()), data, 0o644))
	}
	_, err = os.Stat("migrations")
	require.ErrorIs(t, err, os.ErrNotExist, "the working directory must not hold a migrations directory")
	text, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append([]byte("migrations: ./migrations\n"), text...), 0o600))

	// init migrates the fresh shards to the newest in the file's directory.
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "migrate", "status", "--config", path, "--json")
	require.Equal(t, 0, code, out)
	require.Equal(t, 6, strings.Count(out, `"version": 2`), out)
	out, code = runClusterCmd(t, "migrate", "up", "--config", path)
	require.Equal(t, 0, code, out)

	// --dir wins: a directory that does not exist is the error, not the
	// file's.
	missing := filepath.Join(t.TempDir(), "nope")
	out, code = runClusterCmd(t, "migrate", "status", "--config", path, "--dir", missing)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, missing)
	out, code = runClusterCmd(t, "shard", "move", "0", "--to", "pg2", "--config", path, "--dir", missing)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, missing)

	// Moving migrated shards needs the migrations: the file's are used.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("  - name: pg4\n    dsn: " + pgtest.NewDB(t, pgtest.Servers(t, 4)[3]) + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, code = runClusterCmd(t, "init", "--config", path) // the one step that applies the file's hosts
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "rebalance", "apply", "--config", path)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?m)^\d+\s+\d+\s+pg\d\s+pg4\s+online\s+cleaned\s`, out)
	out, code = runClusterCmd(t, "shard", "move", "0", "--to", "pg4", "--config", path)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?m)^\d+\s+0\s+pg1\s+pg4\s+online\s+cleaned\s`, out)
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// The issue's commands on a migrated cluster: `shard move 0 --to pg4
// --mode offline` and the drain's `rebalance apply`, without the
// migrations, exit 1 with a preflight line naming the migrations and the
// flag that fixes it; nothing is journaled and the generation stays. With
// --dir the same move runs.
func TestShardMoveWithoutMigrationsIsRefusedFirst(t *testing.T) {
	t.Parallel()
	path, _ := clusterFile(t, 6)
	dir := filepath.Join("..", "..", "testdata", "migrations")
	for _, args := range [][]string{{"init"}, {"migrate", "up", "--dir", dir}} {
		out, code := runClusterCmd(t, append(args, "--config", path)...)
		require.Zero(t, code, out)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "  - name: pg4\n    dsn: %s\n", pgtest.NewDB(t, pgtest.Servers(t, 4)[3]))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	generation := func() int64 {
		out, code := runClusterCmd(t, "status", "--config", path, "--json")
		require.Zero(t, code, out)
		var st struct{ Generation int64 }
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		return st.Generation
	}
	gen := generation()

	_, stderr, code := runClusterCmdStderr(t, "shard", "move", "0", "--to", "pg4", "--mode", "offline", "--config", path)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "preflight: pg1 (source): migrations is not given, need the migrations up to version 2")
	require.Contains(t, stderr, "fix: pass the migrations directory the shards were migrated with (--dir DIR, or migrations: DIR in the cluster file)")
	require.Contains(t, stderr, "nothing was changed")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), "  - name: pg2", "    drain: true\n  - name: pg2", 1)), 0o600))
	_, stderr, code = runClusterCmdStderr(t, "rebalance", "apply", "--mode", "offline", "--config", path)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "migrations is not given")
	require.Equal(t, gen, generation(), "nothing was recorded")
	out, code := runClusterCmd(t, "rebalance", "status", "--all", "--config", path, "--json")
	require.Zero(t, code, out)
	require.NotContains(t, out, `"shard"`, "no move journaled: %s", out)

	// The file's new host and drain mark are applied by init, not by
	// the move.
	_, stderr, code = runClusterCmdStderr(t, "shard", "move", "0", "--to", "pg4", "--mode", "offline", "--dir", dir, "--config", path)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "host pg4 is not in the catalog")
	require.Contains(t, stderr, "run shardid init to apply the cluster file's hosts")
	require.Equal(t, gen, generation(), "nothing was recorded")
	out, code = runClusterCmd(t, "init", "--config", path)
	require.Zero(t, code, out)
	out, code = runClusterCmd(t, "shard", "move", "0", "--to", "pg4", "--mode", "offline", "--dir", dir, "--config", path)
	require.Zero(t, code, out)
	require.Regexp(t, `(?m)^\d+\s+0\s+pg1\s+pg4\s+offline\s+cleaned\s`, out)
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/localcluster"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// local remove-host takes a server add-host started back out: refused,
// naming its shards, while it holds any (nothing changes); once drained
// and cleaned up, out of the catalog and the file, its server stopped.
func TestLocalRemoveHost(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts its own servers")
	}
	t.Parallel()
	base := pgtest.ReachableTempDir(t)
	dir, config := filepath.Join(base, ".shardid"), filepath.Join(base, "shardid.yaml")
	flags := []string{"--dir", dir, "--write-config", config}
	opts := localcluster.Options{Dir: dir}
	t.Cleanup(func() { localcluster.Down(context.Background(), opts, true) })
	run := func(code int, args ...string) string {
		t.Helper()
		out, got := runClusterCmd(t, args...)
		require.Equal(t, code, got, "shardid %v: %s", args, out)
		return out
	}
	run(0, append([]string{"local", "up", "--hosts", "2", "--shard-count", "4"}, flags...)...)
	run(0, append([]string{"local", "add-host"}, flags...)...)
	c, err := localcluster.Status(opts)
	require.NoError(t, err)
	pg3 := c.Servers[2]
	require.Equal(t, "pg3", pg3.Name)
	run(0, "shard", "move", "0", "--to", "pg3", "--mode", "offline", "--config", config)
	run(0, "shard", "move", "1", "--to", "pg3", "--mode", "offline", "--config", config)

	out := run(1, append([]string{"local", "remove-host", "pg3"}, flags...)...)
	require.Contains(t, out, "host pg3 holds 2 shards: 0-1")
	require.True(t, connects(pg3.DSN), "pg3 still runs")
	file, err := os.ReadFile(config)
	require.NoError(t, err)
	require.Contains(t, string(file), "name: pg3")

	run(0, "shard", "move", "0", "--to", "pg1", "--mode", "offline", "--config", config)
	run(0, "shard", "move", "1", "--to", "pg1", "--mode", "offline", "--config", config)
	run(0, "rebalance", "cleanup", "--all", "--config", config)
	out = run(0, append([]string{"local", "remove-host", "pg3"}, flags...)...)
	require.Contains(t, out, "catalog: remove host pg3")
	require.Contains(t, out, "removed host pg3: out of the cluster file, server stopped")
	require.False(t, connects(pg3.DSN), "pg3 stopped")
	require.NoDirExists(t, pg3.Dir)
	file, err = os.ReadFile(config)
	require.NoError(t, err)
	require.NotContains(t, string(file), "pg3")
	out = run(0, "status", "--config", config)
	require.Contains(t, out, "4 shards on 2 hosts")
	run(0, "verify", "--config", config)
	c, err = localcluster.Status(opts)
	require.NoError(t, err)
	require.Len(t, c.Servers, 2)
	run(1, append([]string{"local", "remove-host", "pg3"}, flags...)...)
}

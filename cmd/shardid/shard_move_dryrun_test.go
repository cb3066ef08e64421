package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shard move --dry-run prints the preflight and the phases, the point of
// no return on the flip's line, and changes nothing: the move is not
// journaled and the shard stays where it was.
func TestShardMoveDryRun(t *testing.T) {
	path := clusterPath(t, 6)
	dir := filepath.Join("..", "..", "testdata", "migrations")
	_, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code)
	_, code = runClusterCmd(t, "migrate", "up", "--config", path, "--dir", dir)
	require.Equal(t, 0, code)

	out, code := runClusterCmd(t, "shard", "move", "5", "--to", "pg1", "--dry-run", "--dir", dir, "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "dry run: shard 5 from pg3 to pg1, online; nothing was changed")
	var flipLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "POINT OF NO RETURN") {
			require.Empty(t, flipLine, "one point of no return")
			flipLine = l
		}
	}
	require.Contains(t, flipLine, "flipped")
	require.Regexp(t, `fenced +writes refused`, out)

	out, code = runClusterCmd(t, "shard", "where", "5", "--config", path)
	require.Equal(t, 0, code)
	require.Contains(t, out, "pg3")
	out, code = runClusterCmd(t, "rebalance", "status", "--config", path, "--json")
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, `"shard":5`)
}

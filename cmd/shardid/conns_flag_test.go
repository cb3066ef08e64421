package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/cluster"
)

// --conns-per-server: on every command that opens the cluster handle,
// in its --help with the default, and checked before anything is read or
// connected (a usage error, exit 2, one line naming the flag).
func TestConnsPerServerFlag(t *testing.T) {
	for _, args := range [][]string{{"init"}, {"migrate", "up"}, {"verify"}, {"status"}, {"shard", "move"}, {"rebalance", "apply"}} {
		out, err := runCmd(t, append(args, "--help")...)
		require.NoError(t, err, args)
		require.Contains(t, out, "--conns-per-server int", args)
		require.Contains(t, out, "(default 32)", args)
	}
	out, err := runCmd(t, "serve", "--help")
	require.NoError(t, err)
	require.NotContains(t, out, "--conns-per-server", "serve opens no cluster handle")

	missing := t.TempDir() + "/none.yaml"
	for _, bad := range []string{"0", "-3", "10001"} {
		out, code := runClusterCmd(t, "status", "--config", missing, "--conns-per-server", bad)
		require.Equal(t, 2, code, bad)
		require.Contains(t, out, "--conns-per-server "+bad+": want 1 to 10000", bad)
	}
	out, code := runClusterCmd(t, "status", "--config", missing, "--conns-per-server", "many")
	require.Equal(t, 2, code)
	require.Contains(t, out, "conns-per-server")
	// A budget too small for init's lock session beside its work: the
	// hint names the flag.
	require.Contains(t, errorWithHint(fmt.Errorf("init: %w", cluster.ErrBudgetTooSmall)), "raise --conns-per-server")
	// A good value gets as far as the file.
	out, code = runClusterCmd(t, "status", "--config", missing, "--conns-per-server", "4")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "none.yaml")
}

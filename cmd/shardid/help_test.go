package main

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

// Each --help names what a new user needs next, instead of a dead end.
func TestHelpNamesTheNextStep(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"shardid local up", "./shardid.yaml"}},
		{[]string{"init", "--help"}, []string{"docs/shardmgr.md", "'shardid local up' writes one"}},
		{[]string{"migrate", "--help"}, []string{"--dir shard-migrations", "the repository's own\nmigrations/ holds shardid's catalog"}},
		{[]string{"migrate", "up", "--help"}, []string{"--shards", "target version (default: the latest in --dir)"}},
		{[]string{"migrate", "down", "--help"}, []string{"--shards", "target version, required: undo every migration above it (0: all of them)", "migrate down --to-version 0 --dir shard-migrations --shards 5"}},
		{[]string{"migrate", "status", "--help"}, []string{"--shards 5,7,10-20"}},
		{[]string{"migrate", "render", "--help"}, []string{"no cluster file is needed", "--schema"}},
		{[]string{"rebalance", "--help"}, []string{"shardid local add-host", "shardid status"}},
		{[]string{"rebalance", "status", "--help"}, []string{"resumed by 'shardid rebalance apply'", "rebalance abort --shard N"}},
		{[]string{"rebalance", "cleanup", "--help"}, []string{"default 24h", "--all drops every one now", "keep_until"}},
		{[]string{"status", "--help"}, []string{"moves in progress", `"moves":[`}},
		{[]string{"id", "encode", "--help"}, []string{"--json"}},
	} {
		out, err := runShardid(t, tc.args...)
		require.NoError(t, err, tc.args)
		for _, w := range tc.want {
			require.Contains(t, out, w, "%v", tc.args)
		}
	}
	// --to-version of down no longer describes up's default.
	out, err := runShardid(t, "migrate", "down", "--help")
	require.NoError(t, err)
	require.NotContains(t, out, "up: default the latest")

	// A missing cluster file says how to get one.
	err = fmt.Errorf("%w: shardid.yaml not found: %w", shardmgr.ErrConfig, fs.ErrNotExist)
	require.Contains(t, errorWithHint(err), "shardid local up writes one")
}

// shardid completion bash|zsh|fish prints a completion script (cobra's,
// kept enabled), and completing "shardid shard " offers its commands.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "# bash completion", "zsh": "#compdef shardid", "fish": "# fish completion for shardid"} {
		out, err := runCmd(t, "completion", shell)
		require.NoError(t, err, shell)
		require.True(t, strings.HasPrefix(out, want), "%s: %.80q", shell, out)
	}
	out, err := runCmd(t, "__complete", "shard", "")
	require.NoError(t, err)
	require.Contains(t, out, "move\t")
	require.Contains(t, out, "where\t")
	out, err = runCmd(t, "__complete", "local", "")
	require.NoError(t, err)
	require.Contains(t, out, "remove-host\t")
}

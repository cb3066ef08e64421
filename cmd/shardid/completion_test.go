package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 30 §4: the shell completes host names for shard move --to, host
// drain, host remove (and set-dsn, failover, drop-stray --host) from the
// cluster file's hosts, without a database: the DSNs here lead nowhere,
// and a password the shell does not set is no reason to offer nothing.
func TestCompletionOffersHostNames(t *testing.T) {
	t.Setenv("SHARDID_TEST_UNSET_PASSWORD", "")
	require.NoError(t, os.Unsetenv("SHARDID_TEST_UNSET_PASSWORD"))
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`cluster: c
shards: 8
catalog: postgres://u:${SHARDID_TEST_UNSET_PASSWORD}@127.0.0.1:1/cat?connect_timeout=600
hosts:
  - name: pg1
    dsn: postgres://u:${SHARDID_TEST_UNSET_PASSWORD}@127.0.0.1:1/a?connect_timeout=600
  - name: pg2
    dsn: postgres://u@127.0.0.1:1/b?connect_timeout=600
  - name: east3
    dsn: postgres://u@127.0.0.1:1/c?connect_timeout=600
`), 0o600))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"host", "drain", ""}, []string{"pg1", "pg2", "east3"}},
		{[]string{"host", "remove", "pg"}, []string{"pg1", "pg2"}},
		{[]string{"host", "set-dsn", "e"}, []string{"east3"}},
		{[]string{"host", "failover", ""}, []string{"pg1", "pg2", "east3"}},
		{[]string{"shard", "move", "3", "--to", ""}, []string{"pg1", "pg2", "east3"}},
		{[]string{"shard", "move", "3", "--to", "pg2"}, []string{"pg2"}},
		{[]string{"shard", "drop-stray", "3", "--host", "east"}, []string{"east3"}},
		{[]string{"host", "remove", "pg1", ""}, nil}, // one NAME only
	} {
		// --config after the command's words, where cobra parses it.
		args := []string{"__complete", tc.args[0], tc.args[1], "--config", path}
		args = append(args, tc.args[2:]...)
		stdout, _, err := execute(t, args...)
		require.NoError(t, err, "%v", tc.args)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Equal(t, ":4", lines[len(lines)-1], "no file names offered: %v: %q", tc.args, stdout)
		got := lines[:len(lines)-1]
		if len(got) == 0 {
			got = nil
		}
		require.Equal(t, tc.want, got, "%v", tc.args)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every renamed flag (issue 31: one meaning per name) keeps its old
// spelling as a deprecated alias: the old spelling sets the same value as
// the new one, marks the new one given, says on stderr that it is
// deprecated and which spelling replaces it, and is gone from --help; the
// new spelling does the same without the line. Failed before: the new
// spellings did not exist.
func TestRenamedFlagsKeepTheirOldSpelling(t *testing.T) {
	cases := []struct {
		cmd           []string
		old, new, arg string
		want          string // the value the new flag holds
	}{
		{[]string{"shard", "where"}, "dsn", "dsn-only", "", "true"},
		{[]string{"demo"}, "shards", "shard-count", "16", "16"},
		{[]string{"demo"}, "sessions", "workers", "3", "3"},
		{[]string{"local", "up"}, "shards", "shard-count", "16", "16"},
		{[]string{"local", "up"}, "config", "write-config", "x.yaml", "x.yaml"},
		{[]string{"local", "status"}, "config", "write-config", "x.yaml", "x.yaml"},
		{[]string{"migrate", "up"}, "to", "to-version", "2", "2"},
		{[]string{"migrate", "down"}, "to", "to-version", "0", "0"},
		{[]string{"host", "failover"}, "to", "to-dsn", "postgres://app@h/app", "postgres://app@h/app"},
		{[]string{"rebalance", "plan"}, "parallel", "workers", "3", "3"},
		{[]string{"rebalance", "apply"}, "parallel", "workers", "3", "3"},
		{[]string{"host", "drain"}, "parallel", "workers", "3", "3"},
		{[]string{"bench"}, "clients", "workers", "4,5", "[4,5]"},
		{[]string{"bench", "schemes"}, "goroutines", "workers", "7", "7"},
	}
	for _, c := range cases {
		name := strings.Join(c.cmd, " ") + " --" + c.old
		for _, spelling := range []string{c.old, c.new} {
			root := newRootCmd()
			var errOut bytes.Buffer
			root.SetErr(&errOut)
			cmd, _, err := root.Find(c.cmd)
			require.NoError(t, err, name)
			require.Equal(t, c.cmd[len(c.cmd)-1], cmd.Name(), name)
			args := []string{"--" + spelling}
			if c.arg != "" {
				args = append(args, c.arg)
			}
			require.NoError(t, cmd.ParseFlags(args), name)
			f := cmd.Flags().Lookup(c.new)
			require.NotNil(t, f, name)
			require.Equal(t, c.want, f.Value.String(), "%s: --%s sets --%s", name, spelling, c.new)
			require.True(t, f.Changed, "%s: --%s marks --%s given", name, spelling, c.new)
			line := "Flag --" + c.old + " has been deprecated, use --" + c.new + " instead"
			if spelling == c.old {
				require.Contains(t, errOut.String(), line, name)
			} else {
				require.Empty(t, errOut.String(), name)
			}
		}
		var help bytes.Buffer
		root := newRootCmd()
		root.SetOut(&help)
		root.SetArgs(append(append([]string{}, c.cmd...), "--help"))
		require.NoError(t, root.Execute())
		require.Contains(t, help.String(), "--"+c.new+" ", name)
		require.NotContains(t, help.String(), "--"+c.old+" ", "%s: the old spelling is not offered", name)
	}
}

// An old spelling reaches the same checks as the new: rebalance apply
// --parallel 0 is refused as --workers 0 is (exit 2), with the deprecation
// line on stderr and nothing on stdout but the error.
func TestOldFlagSpellingIsCheckedAsTheNew(t *testing.T) {
	for _, args := range [][]string{
		{"rebalance", "apply", "--parallel", "0"},
		{"rebalance", "apply", "--workers", "0"},
	} {
		stdout, stderr, err := execute(t, args...)
		require.Error(t, err)
		require.Equal(t, 2, exitCode(err))
		require.ErrorContains(t, err, "--workers must be at least 1")
		require.Empty(t, stdout)
		if args[2] == "--parallel" {
			require.Contains(t, stderr, "Flag --parallel has been deprecated, use --workers instead")
		} else {
			require.NotContains(t, stderr, "deprecated")
		}
	}
}

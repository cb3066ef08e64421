package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// execute runs shardid with args in this process, as main does, within
// a bound on a hang: the one CLI runner of the tests (the three below
// only shape what it returns).
func execute(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), 5*time.Minute, errors.New("shardid command took over 5 minutes"))
	defer cancel()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// runClusterCmd runs shardid with args and returns stdout, stderr-free
// error text and the exit code main would use.
func runClusterCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, _, err := execute(t, args...)
	if err != nil {
		out += "error: " + err.Error()
	}
	return out, exitCode(err)
}

// runClusterCmdStderr is runClusterCmd that also returns what the command
// wrote on stderr (progress, preflight lines) and main's last line.
func runClusterCmdStderr(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, err := execute(t, args...)
	if err != nil {
		stderr += "shardid: " + oneLine(errorWithHint(err)) + "\n"
	}
	return stdout, stderr, exitCode(err)
}

// runCmd runs shardid with args and returns stdout and the command's error.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := execute(t, args...)
	return out, err
}

// clusterFile writes a cluster file for shards shards on three local
// servers with databases of this test's own and returns its path and the
// host DSNs.
func clusterFile(t *testing.T, shards int) (string, []string) {
	t.Helper()
	servers := pgtest.Servers(t, 3)
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: cli\nshards: %d\ncatalog: %s\nhosts:\n", shards, pgtest.NewDB(t, servers[0]))
	var dsns []string
	for i, s := range servers {
		dsn := pgtest.NewDB(t, s)
		dsns = append(dsns, dsn)
		fmt.Fprintf(&b, "  - name: pg%d\n    dsn: %s\n", i+1, dsn)
	}
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path, dsns
}

// clusterPath is clusterFile for tests that need only the path.
func clusterPath(t *testing.T, shards int) string {
	t.Helper()
	path, _ := clusterFile(t, shards)
	return path
}

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/localcluster"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// runMainEnv makes the test binary run the command instead of the tests,
// so that a test can start shardid in a process of its own.
const runMainEnv = "SHARDID_TEST_RUN_MAIN"

func runMainIfAsked() {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"shardid"}, os.Args[1:]...)
		main()
	}
}

// runChild runs shardid with args in a child process and returns its
// combined output; the test fails unless it exits 0.
func runChild(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "shardid %v:\n%s", args, out)
	return string(out)
}

func connects(dsn string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a stopped server refuses at once
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

func TestLocalClusterOutlivesItsCommandAndComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts its own servers")
	}
	base := pgtest.ReachableTempDir(t)
	dir, config := filepath.Join(base, ".shardid"), filepath.Join(base, "shardid.yaml")
	flags := []string{"--dir", dir, "--write-config", config}
	opts := localcluster.Options{Dir: dir}
	t.Cleanup(func() { localcluster.Down(context.Background(), opts, true) })

	// Started by a process that then exits: the servers stay up.
	out := runChild(t, append([]string{"local", "up", "--hosts", "2", "--shard-count", "8"}, flags...)...)
	require.Contains(t, out, "wrote "+config)
	require.Contains(t, out, "shardid local down")
	c, err := localcluster.Status(opts)
	require.NoError(t, err)
	require.Len(t, c.Servers, 2)
	for _, s := range c.Servers {
		require.True(t, s.Running, s.Name)
		require.True(t, connects(s.DSN), "%s accepts connections after its starter exited", s.Name)
	}
	out, code := runClusterCmd(t, "status", "--config", config)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "8 shards on 2 hosts")

	// Up again: the same servers, the same file, nothing to do.
	file, err := os.ReadFile(config)
	require.NoError(t, err)
	out, code = runClusterCmd(t, append([]string{"local", "up", "--hosts", "5"}, flags...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "(unchanged)")
	require.Contains(t, out, "nothing to do")
	require.NotContains(t, out, "created")
	again, err := os.ReadFile(config)
	require.NoError(t, err)
	require.Equal(t, string(file), string(again))

	// A third host, in the file and the catalog; verify passes.
	out, code = runClusterCmd(t, append([]string{"local", "add-host"}, flags...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "added host pg3")
	out, code = runClusterCmd(t, "verify", "--config", config)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "on 3 hosts")

	// Down from another process: every server gone.
	out = runChild(t, append([]string{"local", "down"}, flags...)...)
	require.Contains(t, out, "stopped 3 servers")
	c, err = localcluster.Status(opts)
	require.NoError(t, err)
	for _, s := range c.Servers {
		require.False(t, s.Running, s.Name)
		require.False(t, connects(s.DSN), s.Name)
	}

	// Up starts them again; down --purge removes everything it made.
	out, code = runClusterCmd(t, append([]string{"local", "up"}, flags...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "started")
	out, code = runClusterCmd(t, append([]string{"local", "down", "--purge"}, flags...)...)
	require.Equal(t, 0, code, out)
	require.NoDirExists(t, dir)
	require.NoFileExists(t, config)
	for _, s := range c.Servers {
		require.False(t, connects(s.DSN), s.Name)
	}
}

func TestLocalUpLeavesSomeoneElsesClusterFileAlone(t *testing.T) {
	base := t.TempDir()
	config := filepath.Join(base, "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte("cluster: mine\n"), 0o600))
	out, code := runClusterCmd(t, "local", "up", "--dir", filepath.Join(base, ".shardid"), "--write-config", config)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "is not this local cluster's")
	b, err := os.ReadFile(config)
	require.NoError(t, err)
	require.Equal(t, "cluster: mine\n", string(b))
	require.NoDirExists(t, filepath.Join(base, ".shardid", "pg1"))
}

func TestLocalStatusWithoutAClusterSaysWhatToRun(t *testing.T) {
	out, code := runClusterCmd(t, "local", "status", "--dir", t.TempDir())
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "shardid local up")
}

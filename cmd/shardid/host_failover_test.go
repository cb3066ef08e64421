package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// TestHostFailoverCommand: `shardid host failover` refuses a standby not
// yet promoted with one line and a hint; after a failover done by hand
// (the file repointed, init run) verify fails the host and prints the
// repair; the command repairs it (text and --json; the cluster file,
// which already names the server, left as it is), after which verify
// passes.
func TestHostFailoverCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	catalog := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	primary := pgtest.Own(t, localpg.Options{})
	primaryDSN, err := primary.CreateDatabase(ctx, "app")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "cluster: fo\nshards: 2\ncatalog: %s\nhosts:\n  - name: pg1\n    dsn: %s\n", catalog, primaryDSN), 0o600))
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)

	standby, err := primary.NewAsyncStandby(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { standby.Stop() })
	require.NoError(t, primary.WaitReplayed(ctx, standby, 2*time.Minute))
	standbyDSN := standby.DSN("app")

	_, stderr, code := runClusterCmdStderr(t, "host", "failover", "pg1", "--to-dsn", standbyDSN, "--config", path)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "the new server is still in recovery")
	require.Contains(t, stderr, "promote the standby first")

	primary.KillHard()
	require.NoError(t, standby.Promote(ctx, 2*time.Minute))

	// By hand: the file repointed, init run. verify fails it, naming the repair.
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(file), primaryDSN, standbyDSN, 1)), 0o600))
	out, code = runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "FAIL failover on pg1: the host's server is on timeline 2, the catalog recorded 1")
	require.Contains(t, out, "(repair: shardid host failover pg1 --to-dsn DSN")

	out, code = runClusterCmd(t, "host", "failover", "pg1", "--to-dsn", standbyDSN, "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "host pg1: failed over to "+standbyDSN+" (timeline 2")
	require.Contains(t, out, "advanced 2 shards by up to")
	// The file already names the server (repointed by hand): the
	// command, which writes it as set-dsn does, leaves it as it is.
	require.NotContains(t, out, "cluster file updated")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(after), "dsn: "+standbyDSN+"\n")
	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Equal(t, 0, code, out)

	// Again: the server is already recorded, timeline 2 is not newer.
	_, stderr, code = runClusterCmdStderr(t, "host", "failover", "pg1", "--to-dsn", standbyDSN, "--config", path)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not newer than the host's server's 2")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, stderr)

	// --json, its shape golden (the record put back to the old timeline).
	_, err = pgtest.Pool(t, catalog).Exec(ctx, `UPDATE shardid.hosts SET timeline = 1`)
	require.NoError(t, err)
	checkGolden(t, "host-failover.json.shape", jsonShape(t, goldenCmd(t, 0, "host", "failover", "pg1", "--to-dsn", standbyDSN, "--config", path, "--json")))
}

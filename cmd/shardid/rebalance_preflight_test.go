package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// A source on a server with the default wal_level: plan, apply and shard
// move print a line per failed check naming wal_level, its value, the
// value needed and the fixes, exit 1 and change nothing; --mode auto moves
// the shard offline and says why.
func TestRebalanceCLIPreflight(t *testing.T) {
	servers := pgtest.Servers(t, 3)
	replica := pgtest.Own(t, localpg.Options{Settings: map[string]string{"wal_level": "replica"}})
	target := pgtest.Own(t, localpg.Options{})
	dir := filepath.Join("..", "..", "testdata", "migrations")
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: cli\nshards: 3\ncatalog: %s\nhosts:\n", pgtest.NewDB(t, servers[0]))
	fmt.Fprintf(&b, "  - name: pg1\n    dsn: %s\n", pgtest.NewDB(t, replica))
	fmt.Fprintf(&b, "  - name: pg2\n    dsn: %s\n", pgtest.NewDB(t, servers[1]))
	fmt.Fprintf(&b, "  - name: pg3\n    dsn: %s\n", pgtest.NewDB(t, servers[2]))
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "migrate", "up", "--config", path, "--dir", dir)
	require.Equal(t, 0, code, out)
	// pg1 drains into pg4, a new host.
	text := strings.Replace(b.String(), "  - name: pg2", "    drain: true\n  - name: pg2", 1) +
		fmt.Sprintf("  - name: pg4\n    dsn: %s\n", pgtest.NewDB(t, target))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))

	wantLine := "preflight: pg1 (source): wal_level is replica, need logical; fix: ALTER SYSTEM SET wal_level = logical, then restart the server; or --mode offline (or --mode auto: offline where online cannot run)\n"
	for _, args := range [][]string{
		{"rebalance", "plan"},
		{"rebalance", "apply", "--dir", dir, "--workers", "4"},
		{"shard", "move", "0", "--to", "pg4", "--dir", dir},
	} {
		stdout, stderr, code := runClusterCmdStderr(t, append(args, "--config", path)...)
		require.Equal(t, 1, code, "%v: %s%s", args, stdout, stderr)
		require.Equal(t, wantLine+"shardid: preflight: 1 check failed (above); nothing was changed\n", stderr, args)
	}
	out, code = runClusterCmd(t, "rebalance", "status", "--config", path, "--all")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "no unfinished moves") // and no finished ones: nothing journaled

	// plan --json: the findings beside the moves.
	stdout, _, code := runClusterCmdStderr(t, "rebalance", "plan", "--config", path, "--json")
	require.Equal(t, 1, code, stdout)
	var plan struct {
		Moves []struct {
			Shard      int    `json:"shard"`
			From       string `json:"from"`
			To         string `json:"to"`
			Bytes      int64  `json:"bytes"`
			Mode       string `json:"mode"`
			ModeReason string `json:"mode_reason"`
		} `json:"moves"`
		Preflight []rebalance.Check `json:"preflight"`
	}
	decodeStrict(t, stdout, &plan)
	require.Len(t, plan.Moves, 1)
	require.Equal(t, "online", plan.Moves[0].Mode)
	require.Contains(t, plan.Preflight, rebalance.Check{Host: "pg1", Role: "source", Setting: "wal_level", Value: "replica", Need: "logical",
		Shards: []int{0}, Fix: &rebalance.Fix{Offline: true, SQL: "ALTER SYSTEM SET wal_level = logical", Restart: true}})

	// Auto: offline, and the table says why; phase lines on stderr (no
	// terminal), the summary alone on stdout.
	out, code = runClusterCmd(t, "init", "--config", path) // apply the file's hosts
	require.Equal(t, 0, code, out)
	stdout, stderr, code := runClusterCmdStderr(t, "rebalance", "apply", "--config", path, "--dir", dir, "--mode", "auto")
	require.Equal(t, 0, code, stdout+stderr)
	require.Regexp(t, `(?m)^\d+\s+0\s+pg1\s+pg4\s+offline \(auto: wal_level is replica on pg1\)\s+cleaned\s`, stdout)
	require.Regexp(t, `^(move \d+ shard 0 pg1 -> pg4: \w+\n)+$`, stderr)
	for _, phase := range []string{"schema", "fenced", "copy", "verified", "flipped", "cleaned"} {
		require.Equal(t, 1, strings.Count(stderr, ": "+phase+"\n"), "phase %s once in:\n%s", phase, stderr)
	}
}

// Without a terminal, a move's progress is a line per phase change.
func TestMoveProgressLinesWithoutTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newMoveProgressOn(&buf, false)
	ref := rebalance.MoveRef{ID: 3, Shard: 16, From: "pg1", To: "pg4"}
	for _, ph := range []rebalance.Phase{rebalance.PhaseSchema, rebalance.PhaseCopy, rebalance.PhaseCatchup, rebalance.PhaseCatchup, rebalance.PhaseFenced} {
		p.Update(rebalance.MoveProgress{MoveRef: ref, Phase: ph, Rows: 10, Lag: -1})
	}
	p.Done()
	require.Equal(t, "move 3 shard 16 pg1 -> pg4: schema\nmove 3 shard 16 pg1 -> pg4: copy\nmove 3 shard 16 pg1 -> pg4: catchup\nmove 3 shard 16 pg1 -> pg4: fenced\n", buf.String())
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

// TestGoldenHostJSON: the host commands end to end on real servers, each
// --json output held by shape: list, set-dsn, a drain planned (nothing
// changed) and run (moves as rebalance apply makes them), a remove refused
// while the drained host keeps retired copies, then done after cleanup.
func TestGoldenHostJSON(t *testing.T) {
	path, dsns := clusterFile(t, 6)
	dir := initAndFill(t, path, 6, 10)

	out := goldenCmd(t, 0, "host", "list", "--config", path, "--json")
	checkGolden(t, "host-list.json.shape", jsonShape(t, out))
	text := string(goldenCmd(t, 0, "host", "list", "--config", path))
	require.Contains(t, text, "pg2  ")
	require.Contains(t, text, "2 (2-3)")
	require.Contains(t, text, "primary")

	// set-dsn: pg2's database under another spelling.
	pc, err := pgconn.ParseConfig(dsns[1])
	require.NoError(t, err)
	dsn := fmt.Sprintf("host=%s port=%d dbname=%s user=postgres sslmode=disable", pc.Host, pc.Port, pc.Database)
	out = goldenCmd(t, 0, "host", "set-dsn", "pg2", dsn, "--config", path, "--json")
	checkGolden(t, "host-set-dsn.json.shape", jsonShape(t, out))
	var sd struct {
		Changed bool   `json:"changed"`
		NewDSN  string `json:"new_dsn"`
	}
	require.NoError(t, json.Unmarshal(out, &sd))
	require.True(t, sd.Changed)
	require.Equal(t, dsn, sd.NewDSN)
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	h, _ := cfg.Host("pg2")
	require.Equal(t, dsn, h.DSN, "the cluster file carries the new DSN")

	// Bad input: one line, nothing changed.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, args := range [][]string{
		{"host", "set-dsn", "pg9", dsn},
		{"host", "set-dsn", "pg2", dsns[2]},
		{"host", "remove", "pg1"},
		{"host", "drain", "pg9"},
	} {
		stdout, stderr, code := runClusterCmdStderr(t, append(args, "--config", path)...)
		require.Equal(t, 1, code, "%v: %s %s", args, stdout, stderr)
		require.Empty(t, stdout, args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %s", args, stderr)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, string(before), string(after), args)
	}

	// A drain whose preflight fails (the shards have tables, and no
	// migrations are given to build them on the targets) marks nothing.
	_, _, refused := runClusterCmdStderr(t, "host", "drain", "pg3", "--config", path)
	require.Equal(t, 1, refused)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "a refused drain marks nothing")

	// Drain pg3: the plan first, changing nothing.
	out = goldenCmd(t, 0, "host", "drain", "pg3", "--dry-run", "--dir", dir, "--config", path, "--json")
	checkGolden(t, "host-drain-dry-run.json.shape", jsonShape(t, out))
	after, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "a dry run marks nothing")
	text = string(goldenCmd(t, 0, "host", "drain", "pg3", "--dry-run", "--dir", dir, "--config", path))
	require.Contains(t, text, "2 moves")

	out = goldenCmd(t, 0, "host", "drain", "pg3", "--dir", dir, "--config", path, "--json")
	checkGolden(t, "host-drain.json.shape", jsonShape(t, out))
	var dr struct {
		Apply struct {
			Moves []struct {
				From, To string
			} `json:"moves"`
		} `json:"apply"`
	}
	require.NoError(t, json.Unmarshal(out, &dr))
	require.Len(t, dr.Apply.Moves, 2)
	for _, m := range dr.Apply.Moves {
		require.Equal(t, "pg3", m.From)
	}
	cfg, err = shardmgr.LoadConfig(path)
	require.NoError(t, err)
	h, _ = cfg.Host("pg3")
	require.True(t, h.Drain, "the file marks pg3 drain")
	r, err := shardmgr.Open(context.Background(), cfg)
	require.NoError(t, err)
	defer r.Close()
	require.Empty(t, r.Map().ShardsOn("pg3"))
	for s := range 6 {
		routeLikes(t, r, s, 1)
	}
	// Again: nothing left to move.
	text = string(goldenCmd(t, 0, "host", "drain", "pg3", "--dir", dir, "--config", path))
	require.Contains(t, text, "nothing to move")

	// Remove: refused while pg3 keeps the moved shards' retired copies.
	stdout, stderr, code := runClusterCmdStderr(t, "host", "remove", "pg3", "--config", path)
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stderr, "keeps the retired copies of move")
	require.Contains(t, stderr, "rebalance cleanup")
	goldenCmd(t, 0, "rebalance", "cleanup", "--all", "--config", path)
	out = goldenCmd(t, 0, "host", "remove", "pg3", "--config", path, "--json")
	checkGolden(t, "host-remove.json.shape", jsonShape(t, out))
	cfg, err = shardmgr.LoadConfig(path)
	require.NoError(t, err)
	_, ok := cfg.Host("pg3")
	require.False(t, ok, "out of the cluster file")
	changed, err := r.Reload(context.Background())
	require.NoError(t, err)
	require.True(t, changed)
	for s := range 6 {
		routeLikes(t, r, s, 1)
	}
	// The catalog and the file agree: init has nothing to change.
	text = string(goldenCmd(t, 0, "verify", "--config", path))
	require.NotContains(t, text, "pg3")
}

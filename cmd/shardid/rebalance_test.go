package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

func decodeStrict(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), out)
}

// The README's flow: three hosts, a fourth added to the cluster file,
// shardid rebalance plan, shardid rebalance apply, verify.
func TestRebalanceCLI(t *testing.T) {
	path, _ := clusterFile(t, 6)
	dir := initAndFill(t, path, 6, 100)

	out, code := runClusterCmd(t, "rebalance", "plan", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "balanced by count: nothing to move")

	// Add a host to the cluster file.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "  - name: pg4\n    dsn: %s\n", pgtest.NewDB(t, pgtest.Servers(t, 4)[3]))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	out, code = runClusterCmd(t, "rebalance", "plan", "--config", path, "--json")
	require.Equal(t, 0, code, out)
	var plan struct {
		Moves []struct {
			Shard int    `json:"shard"`
			From  string `json:"from"`
			To    string `json:"to"`
			Bytes int64  `json:"bytes"`
			Mode  string `json:"mode"`
		} `json:"moves"`
		Preflight []rebalance.Check `json:"preflight"`
	}
	decodeStrict(t, out, &plan)
	require.Equal(t, "online", plan.Moves[0].Mode)
	require.NotEmpty(t, plan.Preflight)
	for _, c := range plan.Preflight {
		require.True(t, c.OK, "%v", c)
	}
	require.Len(t, plan.Moves, 1)
	require.Equal(t, "pg3", plan.Moves[0].From)
	require.Equal(t, "pg4", plan.Moves[0].To)
	require.Equal(t, 5, plan.Moves[0].Shard)
	require.Positive(t, plan.Moves[0].Bytes)

	out, code = runClusterCmd(t, "rebalance", "plan", "--config", path)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?m)^5\s+pg3\s+pg4\s`, out)
	require.Regexp(t, `(?m)^pg4\s+0\s+0 B\s+1\s`, out)

	// apply does not register the host itself: the catalog is where
	// hosts are, and init applies the file's changes to it.
	out, code = runClusterCmd(t, "rebalance", "apply", "--config", path, "--dir", dir, "--workers", "2", "--json")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "host pg4 is not in the catalog")
	out, code = runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "add host pg4")

	out, code = runClusterCmd(t, "rebalance", "apply", "--config", path, "--dir", dir, "--workers", "2", "--json")
	require.Equal(t, 0, code, out)
	var res struct {
		Resumed int `json:"resumed"`
		Moves   []struct {
			ID            int64  `json:"id"`
			Shard         int    `json:"shard"`
			From          string `json:"from"`
			To            string `json:"to"`
			Mode          string `json:"mode"`
			Phase         string `json:"phase"`
			Rows          int64  `json:"rows"`
			Bytes         int64  `json:"bytes"`
			RefusedMS     int64  `json:"refused_ms"`
			ElapsedMS     int64  `json:"elapsed_ms"`
			Generation    int64  `json:"generation"`
			RetiredSchema string `json:"retired_schema"`
			Error         string `json:"error"`
		} `json:"moves"`
		ElapsedMS        int64   `json:"elapsed_ms"`
		Generation       int64   `json:"generation"`
		WaitedMS         int64   `json:"waited_ms"`
		FinishedByOthers []int64 `json:"finished_by_others"`
	}
	decodeStrict(t, out, &res)
	require.Zero(t, res.WaitedMS, "no other manager: nothing waited for")
	require.Len(t, res.Moves, 1)
	require.Equal(t, "cleaned", res.Moves[0].Phase)
	require.Equal(t, "online", res.Moves[0].Mode)
	require.EqualValues(t, 100, res.Moves[0].Rows)
	require.Equal(t, fmt.Sprintf("shard_0005_moved_g%d", res.Moves[0].Generation), res.Moves[0].RetiredSchema)

	out, code = runClusterCmd(t, "verify", "--config", path, "--deep")
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "rebalance", "apply", "--config", path, "--dir", dir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "balanced: nothing to move")

	// One shard by hand, offline, and back.
	out, code = runClusterCmd(t, "shard", "move", "0", "--to", "pg4", "--mode", "offline", "--config", path, "--dir", dir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?m)^\d+\s+0\s+pg1\s+pg4\s+offline\s+cleaned\s+100\s`, out)
	out, code = runClusterCmd(t, "shard", "move", "0", "--to", "pg1", "--config", path, "--dir", dir, "--keep", "0", "--json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"phase": "cleaned"`)

	out, code = runClusterCmd(t, "rebalance", "status", "--config", path, "--all")
	require.Equal(t, 0, code, out)
	require.Equal(t, 3, strings.Count(out, "cleaned"), out)
	// Each finished move says how many rows it copied and how long it
	// refused writes (the status printed neither).
	require.Regexp(t, `(?m)^MOVE\s+SHARD\s+FROM\s+TO\s+MODE\s+PHASE\s+ROWS\s+REFUSED\s+STARTED`, out)
	require.Regexp(t, `(?m)^\d+\s+0\s+pg1\s+pg4\s+offline\s+cleaned\s+100\s+[0-9][0-9.hmµs]*\s`, out)
	out, code = runClusterCmd(t, "rebalance", "status", "--config", path, "--all", "--json")
	require.Equal(t, 0, code, out)
	var status struct {
		Moves []struct {
			Phase     string `json:"phase"`
			RefusedMS *int64 `json:"refused_ms"`
		} `json:"moves"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &status))
	require.Len(t, status.Moves, 3)
	for _, m := range status.Moves {
		require.NotNil(t, m.RefusedMS, "a cleaned move reports its refused window: %s", out)
	}
	out, code = runClusterCmd(t, "rebalance", "abort", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "no unfinished move")

	// Right after the moves, cleanup keeps the two copies kept for the
	// default --keep, and says until when and how to drop them now.
	out, code = runClusterCmd(t, "rebalance", "cleanup", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "0 dropped, 2 kept\n")
	require.Regexp(t, `(?m)^kept shard_0005_moved_g\d+ on pg3 \(shard 5, move \d+\) until 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in 2[34]h\d+m\)$`, out)
	require.Regexp(t, `(?m)^kept shard_0000_moved_g\d+ on pg1 \(shard 0, move \d+\) until `, out)
	require.Contains(t, out, "default 24h")
	require.Contains(t, out, "'shardid rebalance cleanup --all' drops them now")
	out, code = runClusterCmd(t, "rebalance", "cleanup", "--config", path, "--json")
	require.Equal(t, 0, code, out)
	var kept struct {
		Dropped    []any `json:"dropped"`
		Kept       int   `json:"kept"`
		KeptCopies []struct {
			Move      int64     `json:"move"`
			Shard     int       `json:"shard"`
			Host      string    `json:"host"`
			Schema    string    `json:"schema"`
			KeepUntil time.Time `json:"keep_until"`
		} `json:"kept_copies"`
	}
	decodeStrict(t, out, &kept)
	require.Empty(t, kept.Dropped)
	require.Equal(t, 2, kept.Kept)
	require.Len(t, kept.KeptCopies, 2)
	require.Equal(t, 5, kept.KeptCopies[0].Shard, "the earliest to expire first")
	require.WithinDuration(t, time.Now().Add(24*time.Hour), kept.KeptCopies[0].KeepUntil, 10*time.Minute)

	out, code = runClusterCmd(t, "rebalance", "cleanup", "--config", path, "--all", "--json")
	require.Equal(t, 0, code, out)
	var cl struct {
		Dropped []struct {
			Move   int64  `json:"move"`
			Shard  int    `json:"shard"`
			Host   string `json:"host"`
			Schema string `json:"schema"`
		} `json:"dropped"`
		Kept       int   `json:"kept"`
		KeptCopies []any `json:"kept_copies"`
	}
	decodeStrict(t, out, &cl)
	require.Len(t, cl.Dropped, 2) // the third was dropped at once (--keep 0)
	require.Empty(t, cl.KeptCopies)
	out, code = runClusterCmd(t, "verify", "--config", path, "--deep")
	require.Equal(t, 0, code, out)
}

func TestRebalanceCLIBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"rebalance", "plan", "--by", "weight"}, 2, `--by "weight"`},
		{[]string{"rebalance", "apply", "--workers", "0"}, 2, "--workers"},
		{[]string{"rebalance", "apply", "--mode", "fast"}, 2, `--mode "fast"`},
		{[]string{"shard", "move", "x", "--to", "pg4"}, 2, `shard "x"`},
		{[]string{"shard", "move", "1"}, 2, "--to is required"},
		{[]string{"shard", "move"}, 2, "accepts 1 arg"},
		{[]string{"rebalance", "plan", "--config", "nope.yaml"}, 1, "nope.yaml not found"},
	} {
		out, code := runClusterCmd(t, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, out)
		require.Contains(t, out, tc.msg, tc.args)
	}
}

func TestPrintKeptCopies(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var kept []rebalance.KeptCopy
	for i := range 12 {
		kept = append(kept, rebalance.KeptCopy{
			RetiredCopy: rebalance.RetiredCopy{MoveID: int64(i + 1), Shard: i, Host: "pg1", Schema: fmt.Sprintf("shard_%04d_moved_g3", i)},
			KeepUntil:   now.Add(time.Duration(i+1) * time.Hour),
		})
	}
	var b strings.Builder
	printKeptCopies(&b, kept[:1], now)
	require.Equal(t, "kept shard_0000_moved_g3 on pg1 (shard 0, move 1) until 2026-11-29T13:00:00Z (in 1h0m)\n"+
		"old copies are kept for the --keep of apply or shard move (default 24h); a later cleanup drops them, 'shardid rebalance cleanup --all' drops them now\n", b.String())
	b.Reset()
	printKeptCopies(&b, kept, now)
	require.True(t, strings.HasPrefix(b.String(), "kept 12 old copies: the first expires 2026-11-29T13:00:00Z (in 1h0m), the last 2026-11-30T00:00:00Z (in 12h0m)\n"), b.String())
	b.Reset()
	printKeptCopies(&b, nil, now)
	require.Empty(t, b.String())
}

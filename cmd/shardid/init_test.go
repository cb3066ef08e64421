package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestInitStatusVerifyCLI(t *testing.T) {
	cfg, dsns := clusterFile(t, 6)
	out, code := runClusterCmd(t, "init", "--config", cfg)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "installed 6 shards, 0 already in place; generation 1")

	t.Setenv("SHARDID_CONFIG", cfg) // the default of --config
	out, code = runClusterCmd(t, "init")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "nothing to do")

	out, code = runClusterCmd(t, "status", "--json")
	require.Equal(t, 0, code, out)
	var st struct {
		Generation int64 `json:"generation"`
		Hosts      []struct {
			Name   string `json:"name"`
			Shards []int  `json:"shards"`
		} `json:"hosts"`
		Shards []struct {
			ID     int    `json:"id"`
			Schema string `json:"schema"`
			Host   string `json:"host"`
			State  string `json:"state"`
		} `json:"shards"`
		Moves []any `json:"moves"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&st))
	require.EqualValues(t, 1, st.Generation)
	require.Len(t, st.Hosts, 3)
	require.Equal(t, []int{2, 3}, st.Hosts[1].Shards)
	require.Len(t, st.Shards, 6)
	require.Equal(t, "shard_0005", st.Shards[5].Schema)
	require.Equal(t, "pg3", st.Shards[5].Host)
	require.Equal(t, "active", st.Shards[5].State)
	require.NotNil(t, st.Moves)
	require.Empty(t, st.Moves)

	out, code = runClusterCmd(t, "status")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "cluster cli, generation 1, 6 shards on 3 hosts")
	require.Regexp(t, `(?m)^2-3\s+pg2\s+active$`, out)

	out, code = runClusterCmd(t, "verify")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "verify: ok: 6 shards on 3 hosts")

	// A stray copy of shard 1 on pg2: verify says so and exits 1.
	conn, err := pgx.Connect(context.Background(), dsns[1])
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), "CREATE SCHEMA shard_0001")
	conn.Close(context.Background())
	require.NoError(t, err)
	out, code = runClusterCmd(t, "verify", "--json", "--deep")
	require.Equal(t, 1, code, out)
	var rep struct {
		OK       bool `json:"ok"`
		Problems []struct {
			Check  string `json:"check"`
			Shard  *int   `json:"shard"`
			Host   string `json:"host"`
			Detail string `json:"detail"`
		} `json:"problems"`
		Generators []struct {
			Kind   string `json:"kind"`
			Count  int    `json:"count"`
			Shards string `json:"shards"`
		} `json:"generators"`
	}
	dec = json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep))
	require.Len(t, rep.Generators, 1, "every shard runs the default generator")
	require.Equal(t, "plpgsql", rep.Generators[0].Kind)
	require.Equal(t, "0-5", rep.Generators[0].Shards)
	require.False(t, rep.OK)
	require.Len(t, rep.Problems, 1)
	require.Equal(t, "placement", rep.Problems[0].Check)
	require.Equal(t, 1, *rep.Problems[0].Shard)
	require.Equal(t, "pg2", rep.Problems[0].Host)
	require.Contains(t, rep.Problems[0].Detail, "stray copy of shard 1")

	out, code = runClusterCmd(t, "verify")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "FAIL placement shard 1 on pg2: stray copy")
	require.Contains(t, out, "verify: 1 problem:")
}

func TestClusterCLIBadInput(t *testing.T) {
	clusters := filepath.Join("..", "..", "testdata", "clusters")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"init", "--config", filepath.Join(clusters, "unknown-key.yaml")}, 1, `line 7: unknown key "port"`},
		{[]string{"status", "--config", filepath.Join(clusters, "duplicate-host.yaml")}, 1, `duplicate host name "pg1"`},
		{[]string{"verify", "--config", filepath.Join(clusters, "duplicate-dsn.yaml")}, 1, "duplicate DSN"},
		{[]string{"init", "--config", filepath.Join(clusters, "too-many-shards.yaml")}, 1, "shards: 10000 is impossible (1..8192)"},
		{[]string{"verify", "--config", filepath.Join(clusters, "segments-only.yaml")}, 1, "cluster: missing"},
		{[]string{"status", "--config", filepath.Join(clusters, "nope.yaml")}, 1, "nope.yaml not found"},
		{[]string{"verify", "--probe-ids", "0"}, 2, "must be positive"},
		{[]string{"init", "--workers", "0"}, 2, "--workers"},
		{[]string{"status", "extra"}, 2, "unknown command"},
	} {
		out, code := runClusterCmd(t, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, out)
		require.Contains(t, out, tc.msg, tc.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(oneLine(out)), "error: "), "one error")
	}
}

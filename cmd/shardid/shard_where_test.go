package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shard where names a shard's host, its DSN from the cluster file without
// the password, its schema and state; status marks a host it cannot
// reach, and still exits 0 with the map.
func TestShardWhereAndStatusUnreachable(t *testing.T) {
	t.Parallel()
	path, dsns := clusterFile(t, 6)
	_, code := runClusterCmd(t, "init", "--config", path)
	require.Zero(t, code)

	out, code := runClusterCmd(t, "shard", "where", "4", "--config", path, "--json")
	require.Zero(t, code, out)
	var loc struct {
		Shard      int    `json:"shard"`
		Schema     string `json:"schema"`
		Host       string `json:"host"`
		DSN        string `json:"dsn"`
		State      string `json:"state"`
		Generation int64  `json:"generation"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &loc), out)
	require.Equal(t, 4, loc.Shard)
	require.Equal(t, "shard_0004", loc.Schema)
	require.Equal(t, "pg3", loc.Host)
	require.Equal(t, dsns[2], loc.DSN)
	require.Equal(t, "active", loc.State)
	require.Positive(t, loc.Generation)

	out, code = runClusterCmd(t, "shard", "where", "4", "--config", path)
	require.Zero(t, code, out)
	require.Contains(t, out, "shard 4: schema shard_0004 on pg3, active")
	require.Contains(t, out, "dsn: "+dsns[2])
	out, code = runClusterCmd(t, "shard", "where", "4", "--config", path, "--dsn-only")
	require.Zero(t, code, out)
	require.Equal(t, dsns[2]+"\n", out)
	_, code = runClusterCmd(t, "shard", "where", "6", "--config", path)
	require.Equal(t, 1, code, "a shard the cluster does not have")

	// pg3 behind a port nobody listens on, with a password in the file:
	// where leaves the password out, status marks the host.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dead := "postgres://postgres:s3cret@127.0.0.1:1/app?sslmode=disable&connect_timeout=5"
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), dsns[2], dead, 1)), 0o600))
	out, code = runClusterCmd(t, "shard", "where", "4", "--config", path, "--dsn-only")
	require.Zero(t, code, out)
	require.NotContains(t, out, "s3cret")
	require.Contains(t, out, "postgres://postgres@127.0.0.1:1/app")

	out, code = runClusterCmd(t, "status", "--config", path)
	require.Zero(t, code, out)
	require.Contains(t, out, "1 host UNREACHABLE")
	require.Regexp(t, `(?m)^pg3\s+2\s+\S+\s+4-5  UNREACHABLE$`, out)
	require.Regexp(t, `(?m)^pg1\s+2\s+\S+\s+0-1$`, out)
	require.Contains(t, out, "pg3 is unreachable: ")
	require.NotContains(t, out, "s3cret")
	out, code = runClusterCmd(t, "status", "--config", path, "--json")
	require.Zero(t, code, out)
	var st struct {
		Hosts []struct {
			Name        string `json:"name"`
			Unreachable string `json:"unreachable"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Hosts, 3)
	require.Empty(t, st.Hosts[0].Unreachable)
	require.NotEmpty(t, st.Hosts[2].Unreachable)
}

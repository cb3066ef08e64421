package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// init --dir brings every shard to the migration version of the others: on
// a fresh cluster to the newest in the directory, and a shard that init had
// to create again to the version the rest are at.
func TestInitWithMigrationsDir(t *testing.T) {
	ctx := context.Background()
	cfg, dsns := clusterFile(t, 6)
	dir, err := filepath.Abs("../../testdata/migrations")
	require.NoError(t, err)

	out, code := runClusterCmd(t, "init", "--config", cfg, "--dir", dir, "--json")
	require.Equal(t, 0, code, out)
	var res struct {
		Installed  int `json:"installed"`
		Migrations struct {
			Latest int `json:"latest"`
			Shards []struct {
				ID int `json:"id"`
				To int `json:"to"`
			} `json:"shards"`
		} `json:"migrations"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, 6, res.Installed)
	require.Len(t, res.Migrations.Shards, 6)
	for _, s := range res.Migrations.Shards {
		require.Equal(t, res.Migrations.Latest, s.To, "shard %d", s.ID)
	}

	// Shard 0 (on the first host) is lost; init creates it again and --dir
	// gives it the tables the other shards have.
	conn, err := pgx.Connect(ctx, dsns[0])
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA shard_0000 CASCADE; DELETE FROM shardid.local_shards WHERE shard = 0")
	require.NoError(t, err)
	out, code = runClusterCmd(t, "init", "--config", cfg, "--dir", dir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "installed 1 shards, 5 already in place")
	require.Contains(t, out, "migrated 1 (2 migrations run), already there 5, failed 0")
	_, err = conn.Exec(ctx, "INSERT INTO shard_0000.likes (user_id, post_id) VALUES (1, 1)")
	require.NoError(t, err)

	// A directory that does not render changes nothing.
	out, code = runClusterCmd(t, "init", "--config", cfg, "--dir", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, 1, code, out)
}

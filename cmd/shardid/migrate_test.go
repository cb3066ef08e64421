package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/migrate"
)

const sampleMigrations = "../../testdata/migrations"

func writeMigrations(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

func TestMigrateCLI(t *testing.T) {
	cfg := clusterPath(t, 6)
	out, code := runClusterCmd(t, "init", "--config", cfg)
	require.Equal(t, 0, code, out)

	// From an empty cluster to tables in every shard.
	out, code = runClusterCmd(t, "migrate", "up", "--config", cfg, "--dir", sampleMigrations)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "migrate up to version 2 (002_add_likes_post_index.sql): 6 shards")
	require.Contains(t, out, "migrated 6 (12 migrations run), already there 0, failed 0")

	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations, "--json")
	require.Equal(t, 0, code, out)
	var st struct {
		Latest int              `json:"latest"`
		Shards []map[string]any `json:"shards"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, 2, st.Latest)
	require.Len(t, st.Shards, 6)
	require.Equal(t, map[string]any{"id": 5.0, "host": "pg3", "version": 2.0}, st.Shards[5])

	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "latest version 2 (002_add_likes_post_index.sql); 6 shards on 3 hosts")
	require.Contains(t, out, "every shard is at version 2")
	require.Regexp(t, `4-5\s+pg3\s+2`, out)

	out, code = runClusterCmd(t, "migrate", "render", "--config", cfg, "--dir", sampleMigrations, "--shard", "5")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "-- 001_create_likes.sql (version 1), up:\n")
	require.Contains(t, out, "id         bigint      PRIMARY KEY DEFAULT shard_0005.next_id(),")
	rendered := t.TempDir()
	out, code = runClusterCmd(t, "migrate", "render", "--config", cfg, "--dir", sampleMigrations, "--shard", "5", "--format", "golang-migrate", "--out", rendered)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, filepath.Join(rendered, "001_create_likes.up.sql"))
	body, err := os.ReadFile(filepath.Join(rendered, "002_add_likes_post_index.down.sql"))
	require.NoError(t, err)
	require.Equal(t, "DROP INDEX shard_0005.likes_post_id_idx;\n", string(body))

	// One shard fails: the others carry on, the command lists it, exits 1,
	// status shows it; after the fix up finishes it.
	broken := writeMigrations(t, map[string]string{
		"001_create_likes.sql":         mustRead(t, filepath.Join(sampleMigrations, "001_create_likes.sql")),
		"002_add_likes_post_index.sql": mustRead(t, filepath.Join(sampleMigrations, "002_add_likes_post_index.sql")),
		"003_note.sql":                 "ALTER TABLE {{.schema}}.likes ADD COLUMN note text{{if eq .shard_id 4}} NOT A TYPE{{end}};\n---- create above / drop below ----\nALTER TABLE {{.schema}}.likes DROP COLUMN note;",
	})
	out, code = runClusterCmd(t, "migrate", "up", "--config", cfg, "--dir", broken)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "migrated 5 (5 migrations run), already there 0, failed 1")
	require.Contains(t, out, "failed:\n  shard 4 on pg3 stopped at version 2: 003_note.sql (up): ERROR: syntax error at or near \"A\"")
	require.Contains(t, out, "(SQLSTATE 42601)")

	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", broken)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "behind (1): shards 4")
	require.Contains(t, out, "failed (1):\n  shard 4 on pg3 at version 2: 003_note.sql (up) failed ")
	require.Regexp(t, `4\s+pg3\s+2 \(failed\)`, out)

	fixed := writeMigrations(t, map[string]string{
		"001_create_likes.sql":         mustRead(t, filepath.Join(sampleMigrations, "001_create_likes.sql")),
		"002_add_likes_post_index.sql": mustRead(t, filepath.Join(sampleMigrations, "002_add_likes_post_index.sql")),
		"003_note.sql":                 "ALTER TABLE {{.schema}}.likes ADD COLUMN note text;\n---- create above / drop below ----\nALTER TABLE {{.schema}}.likes DROP COLUMN note;",
	})
	out, code = runClusterCmd(t, "migrate", "up", "--config", cfg, "--dir", fixed, "--json")
	require.Equal(t, 0, code, out)
	var res struct {
		Shards []struct {
			ID, From, To, Applied int
		} `json:"shards"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 2, res.Shards[4].From)
	require.Equal(t, 3, res.Shards[4].To)
	require.Equal(t, 0, res.Shards[3].Applied)

	out, code = runClusterCmd(t, "migrate", "down", "--config", cfg, "--dir", fixed, "--to-version", "1")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "migrate down to version 1 (001_create_likes.sql): 6 shards")

	out, code = runClusterCmd(t, "migrate", "generator", "--config", cfg, "--dry-run")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "generator: would upgrade 0 shards, 6 already current, 0 failed")
}

func TestMigrateCLIBadInput(t *testing.T) {
	cfg := clusterPath(t, 6)
	out, code := runClusterCmd(t, "init", "--config", cfg)
	require.Equal(t, 0, code, out)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"migrate", "up", "--config", cfg}, 2},                                                 // --dir missing
		{[]string{"migrate", "down", "--config", cfg, "--dir", sampleMigrations}, 2},                    // --to missing
		{[]string{"migrate", "up", "--config", cfg, "--dir", sampleMigrations, "--to-version", "9"}, 2}, // beyond the directory
		{[]string{"migrate", "up", "--config", cfg, "--dir", filepath.Join(t.TempDir(), "x")}, 1},       // no such directory
		{[]string{"migrate", "render", "--config", cfg, "--dir", sampleMigrations}, 2},                  // --shard missing
		{[]string{"migrate", "render", "--config", cfg, "--dir", sampleMigrations, "--shard", "6"}, 1},  // unknown shard
		{[]string{"migrate", "render", "--config", cfg, "--dir", sampleMigrations, "--shard", "1", "--format", "x"}, 2},
		{[]string{"migrate", "up", "--config", cfg, "--dir", writeMigrations(t, map[string]string{"001_a.sql": "SELECT {{.nope}};"})}, 1},
	} {
		out, code := runClusterCmd(t, c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, out)
	}
	// Nothing was migrated by any of them.
	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations, "--json")
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, `"version": 1`)
	require.NotContains(t, out, `"version": 2`)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestHostBars(t *testing.T) {
	var buf bytes.Buffer
	b := newHostBars(&buf, "migrate up")
	require.Nil(t, b.p, "a buffer is not a terminal: nothing drawn")
	b.Update(migrate.HostProgress{Host: "pg1", Done: 1, Total: 2})
	b.Waiting(migrate.LockWait{Shard: 3, Host: "pg1", HolderPID: 42})
	require.Equal(t, "waiting for lock on shard 3 on pg1: another run (backend pid 42) holds it\n", buf.String())

	buf.Reset()
	for range 5 {
		b.Waiting(migrate.LockWait{Shard: 7, Host: "pg2"})
	}
	out := buf.String()
	require.Equal(t, 3, strings.Count(out, "waiting for lock on shard 7 on pg2: another run holds it\n"))
	require.Equal(t, 1, strings.Count(out, "more shards on pg2 are waiting for another run; not reporting each\n"))

	// On a terminal (drawn here into a buffer): a bar per host, with its
	// counts, and messages above the bars.
	buf.Reset()
	b = &hostBars{progress: newProgressOn(&buf, true), label: "migrate up", waits: map[string]int{}}
	b.Update(migrate.HostProgress{Host: "pg2", Done: 0, Total: 4})
	b.Update(migrate.HostProgress{Host: "pg1", Done: 4, Total: 4, Failed: 1})
	b.Waiting(migrate.LockWait{Shard: 7, Host: "pg2"})
	b.Done()
	out = buf.String()
	require.Contains(t, out, "migrate up pg1")
	require.Contains(t, out, "4/4, 1 failed")
	require.Contains(t, out, "migrate up pg2")
	require.Contains(t, out, "0/4")
	require.Contains(t, out, "waiting for lock on shard 7 on pg2: another run holds it\n")
}

func TestMigrateRenderWithoutCluster(t *testing.T) {
	dir, err := filepath.Abs(sampleMigrations)
	require.NoError(t, err)
	t.Setenv("SHARDID_CONFIG", "")
	t.Chdir(t.TempDir()) // no shardid.yaml here

	out, code := runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "5")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "id         bigint      PRIMARY KEY DEFAULT shard_0005.next_id(),")
	out, code = runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "8191", "--schema", "likes_x")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "CREATE TABLE likes_x.likes (")
	require.Contains(t, out, "DEFAULT likes_x.next_id(),")
	require.Contains(t, out, "'likes of logical shard 8191'")
	require.NotContains(t, out, "shard_8191")
	outDir := filepath.Join(t.TempDir(), "out")
	out, code = runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "5", "--format", "golang-migrate", "--out", outDir)
	require.Equal(t, 0, code, out)
	require.FileExists(t, filepath.Join(outDir, "001_create_likes.up.sql"))

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--shard", "8192"}, 2, "--shard 8192: shards are 0..8191"},
		{[]string{"--shard", "-1"}, 2, "--shard -1: shards are 0..8191"},
		{[]string{"--shard", "1", "--schema", "pg_x"}, 2, "reserved for PostgreSQL's own objects"},
		{[]string{"--shard", "1", "--schema", "a; DROP TABLE x"}, 2, "invalid schema name"},
		{[]string{"--shard", "1", "--config", filepath.Join(t.TempDir(), "none.yaml")}, 1, "none.yaml"},
	} {
		out, code := runClusterCmd(t, append([]string{"migrate", "render", "--dir", dir}, c.args...)...)
		require.Equal(t, c.code, code, "%v: %s", c.args, out)
		require.Contains(t, out, c.msg, c.args)
	}

	// A cluster file in the directory: as before, its shards only, and no
	// other schema.
	require.NoError(t, os.WriteFile("shardid.yaml", []byte("cluster: r\nshards: 6\ncatalog: postgres://127.0.0.1:1/c\nhosts:\n  - name: pg1\n    dsn: postgres://127.0.0.1:1/a\n"), 0o600))
	out, code = runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "5")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "shard_0005.next_id()")
	out, code = runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "6")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "unknown shard: 6 (the cluster has shards 0..5)")
	// --schema renders outside the cluster: the file found here is not
	// read; one named by --config or SHARDID_CONFIG is, and conflicts.
	out, code = runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "7", "--schema", "likes_7")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "likes_7.next_id()")
	out, code = runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "5", "--schema", "likes_5", "--config", "shardid.yaml")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "--schema renders outside a cluster")
	t.Setenv("SHARDID_CONFIG", "shardid.yaml")
	out, code = runClusterCmd(t, "migrate", "render", "--dir", dir, "--shard", "5", "--schema", "likes_5")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "--schema renders outside a cluster")
}

func TestMigrateCLIShards(t *testing.T) {
	cfg := clusterPath(t, 6)
	out, code := runClusterCmd(t, "init", "--config", cfg)
	require.Equal(t, 0, code, out)

	// Bad lists are usage errors and change nothing.
	for _, list := range []string{"", "x", "2-1", "1,,2", "6", "0-6", "8192"} {
		for _, sub := range []string{"up", "status"} {
			out, code := runClusterCmd(t, "migrate", sub, "--config", cfg, "--dir", sampleMigrations, "--shards", list)
			require.Equal(t, 2, code, "%s --shards %q: %s", sub, list, out)
			require.Contains(t, out, "--shards: ", list)
		}
	}
	out, code = runClusterCmd(t, "migrate", "down", "--config", cfg, "--dir", sampleMigrations, "--to-version", "0", "--shards", "3-2")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `--shards: bad shard list: "3-2": the range ends below its start`)
	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "behind (6): shards 0-5")

	out, code = runClusterCmd(t, "migrate", "up", "--config", cfg, "--dir", sampleMigrations, "--shards", "4,1,3-4")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "migrate up to version 2 (002_add_likes_post_index.sql): 3 shards")
	require.Contains(t, out, "migrated 3 (6 migrations run)")

	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "behind (3): shards 0,2,5")

	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations, "--shards", "3-4,0", "--json")
	require.Equal(t, 0, code, out)
	var st struct {
		Shards []map[string]any `json:"shards"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, []map[string]any{
		{"id": 0.0, "host": "pg1", "version": 0.0},
		{"id": 3.0, "host": "pg2", "version": 2.0},
		{"id": 4.0, "host": "pg3", "version": 2.0},
	}, st.Shards)
	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations, "--shards", "3-4")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "latest version 2 (002_add_likes_post_index.sql); 2 shards on 2 hosts")
	require.Contains(t, out, "every shard is at version 2")

	out, code = runClusterCmd(t, "migrate", "down", "--config", cfg, "--dir", sampleMigrations, "--to-version", "0", "--shards", "4")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "migrate down to version 0: 1 shards")
	out, code = runClusterCmd(t, "migrate", "status", "--config", cfg, "--dir", sampleMigrations, "--json")
	require.Equal(t, 0, code, out)
	st.Shards = nil
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	versions := []float64{}
	for _, s := range st.Shards {
		versions = append(versions, s["version"].(float64))
	}
	require.Equal(t, []float64{0, 2, 0, 2, 0, 0}, versions)
}

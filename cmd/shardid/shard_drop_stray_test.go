package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// TestShardDropStray: a stray copy of shard 1 on pg2 (the catalog places
// it on pg1), as an init against another catalog left it: a live
// generator in shard_0001 and pg2's local_shards row, with a copy of the
// live rows and one row of its own. verify names it with the drop-stray
// command (failed before: no repair named); drop-stray refuses while the
// stray holds a row the live copy lacks (naming table and count; nothing
// changed), then drops the schema and pg2's row once that row is gone;
// verify is ok after. A bad shard, host or the live copy: one error line,
// non-zero exit, nothing changed.
func TestShardDropStray(t *testing.T) {
	t.Parallel()
	path, dsns := clusterFile(t, 6)
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Zero(t, code, out)
	ctx := t.Context()
	pg1, pg2 := pgtest.Pool(t, dsns[0]), pgtest.Pool(t, dsns[1])
	run := func(p *pgxpool.Pool, sql string, args ...any) {
		t.Helper()
		_, err := p.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	count := func(p *pgxpool.Pool, sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, p.QueryRow(ctx, sql, args...).Scan(&n), sql)
		return n
	}
	run(pg1, `CREATE TABLE shard_0001.items (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), v text);
		INSERT INTO shard_0001.items (v) SELECT 'row ' || g FROM generate_series(1, 5) g`)
	ddl, err := shsql.Render(shsql.Params{Shard: 1})
	require.NoError(t, err)
	run(pg2, ddl)
	run(pg2, `CREATE TABLE shard_0001.items (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), v text)`)
	run(pg2, `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES (1, 'shard_0001', 'active', 1)`)
	rows, err := pg1.Query(ctx, `SELECT id, v FROM shard_0001.items`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var v string
		require.NoError(t, rows.Scan(&id, &v))
		run(pg2, `INSERT INTO shard_0001.items VALUES ($1, $2)`, id, v)
	}
	require.NoError(t, rows.Err())
	run(pg2, `INSERT INTO shard_0001.items (v) VALUES ('only in the stray')`)

	out, code = runClusterCmd(t, "verify", "--config", path)
	require.NotZero(t, code, out)
	require.Contains(t, out, "stray copy of shard 1 (the catalog places it on pg1)")
	require.Contains(t, out, "shard drop-stray 1 --host pg2", out)

	strayState := func() string {
		t.Helper()
		return strings.Join([]string{
			strings.Repeat("s", count(pg2, `SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_0001'`)),
			strings.Repeat("r", count(pg2, `SELECT count(*) FROM shardid.local_shards WHERE shard = 1`)),
		}, "/")
	}
	require.Equal(t, "s/r", strayState())
	oneLineErr := func(stderr string) string {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		require.Len(t, lines, 1, stderr)
		return lines[0]
	}

	// A row only in the stray: refused, table and count named.
	_, stderr, code := runClusterCmdStderr(t, "shard", "drop-stray", "1", "--host", "pg2", "--config", path)
	require.NotZero(t, code)
	line := oneLineErr(stderr)
	require.Contains(t, line, "the stray copy holds rows the live copy lacks: shard_0001 on pg2 (items: 1)")
	require.Equal(t, "s/r", strayState())
	require.Equal(t, 6, count(pg2, `SELECT count(*) FROM shard_0001.items`))

	// Bad input: the live copy, an unknown host, a shard the cluster
	// lacks, a host without a copy.
	for _, args := range [][]string{
		{"1", "--host", "pg1"},
		{"1", "--host", "pg9"},
		{"6", "--host", "pg2"},
		{"x", "--host", "pg2"},
		{"2", "--host", "pg2"},
		{"1"},
	} {
		_, stderr, code := runClusterCmdStderr(t, append([]string{"shard", "drop-stray", "--config", path}, args...)...)
		require.NotZero(t, code, args)
		oneLineErr(stderr)
	}
	require.Equal(t, "s/r", strayState())
	require.Equal(t, 1, count(pg1, `SELECT count(*) FROM pg_namespace WHERE nspname = 'shard_0001'`))
	require.Equal(t, 5, count(pg1, `SELECT count(*) FROM shard_0001.items`))

	// Once that row is gone (or copied over), the stray is dropped.
	run(pg2, `DELETE FROM shard_0001.items WHERE v = 'only in the stray'`)
	out, code = runClusterCmd(t, "shard", "drop-stray", "1", "--host", "pg2", "--config", path, "--json")
	require.Zero(t, code, out)
	var d struct {
		Shard    int    `json:"shard"`
		Host     string `json:"host"`
		Schema   string `json:"schema"`
		LiveHost string `json:"live_host"`
		Tables   int    `json:"tables"`
		Rows     int64  `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	require.Equal(t, 1, d.Shard)
	require.Equal(t, "pg2", d.Host)
	require.Equal(t, "shard_0001", d.Schema)
	require.Equal(t, "pg1", d.LiveHost)
	require.Equal(t, 1, d.Tables)
	require.EqualValues(t, 5, d.Rows)
	require.Equal(t, "/", strayState())
	require.Equal(t, 5, count(pg1, `SELECT count(*) FROM shard_0001.items`))

	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Zero(t, code, out)
}

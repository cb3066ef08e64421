package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// The printed SQL installs on a bare database, twice, and works as a
// column DEFAULT.
func TestSQLUUIDv7(t *testing.T) {
	out, err := runShardid(t, "sql", "uuidv7", "--schema", "ids")
	require.NoError(t, err)
	require.Contains(t, out, "CREATE OR REPLACE FUNCTION ids.uuidv7()")
	require.NotContains(t, out, "SECURITY DEFINER")
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	ctx := context.Background()
	for range 2 {
		_, err = pool.Exec(ctx, out)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, "CREATE TABLE ev (id uuid PRIMARY KEY DEFAULT ids.uuidv7(), v int); INSERT INTO ev (v) SELECT generate_series(1, 1000)")
	require.NoError(t, err)
	var versions, ordered int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT substr(id::text, 15, 1)),
  count(*) FILTER (WHERE rn = v) FROM (SELECT id, v, row_number() OVER (ORDER BY id) AS rn FROM ev) s`).Scan(&versions, &ordered))
	require.Equal(t, 1, versions)
	require.Equal(t, 1000, ordered, "rows inserted in one statement sort by id in insertion order")

	def, err := runShardid(t, "sql", "uuidv7")
	require.NoError(t, err)
	require.Contains(t, def, "public.uuidv7()")
	_, err = runShardid(t, "sql", "uuidv7", "--schema", "Bad;")
	require.Equal(t, 2, exitCode(err))
}

// PostgreSQL's own schemas are refused, by the rule of sql function.
func TestSQLUUIDv7RefusesSystemSchemas(t *testing.T) {
	for _, schema := range []string{"information_schema", "pg_catalog", "pg_temp", "pg_ids"} {
		out, err := runShardid(t, "sql", "uuidv7", "--schema", schema)
		require.Error(t, err, schema)
		require.Equal(t, 2, exitCode(err), schema)
		require.Contains(t, err.Error(), "is reserved for PostgreSQL's own objects", schema)
		require.Empty(t, out, schema)
	}
}

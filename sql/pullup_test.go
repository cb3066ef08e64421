package sql_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// A pull-up that raises the counter, where no schema of the extension's
// name exists, does not run the catalog query that looks for the
// extension's forward-only raise: at a shard's low rates every insert
// pulls up, and that query cost about two thirds of the pull-up. The
// query's relations would stay locked (AccessShareLock) to the end of the
// transaction, which is how the test sees whether it ran.
func TestPullUpSkipsTheExtensionQueryWithoutItsSchema(t *testing.T) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Shard: 30, Generator: shsql.GeneratorPLpgSQL})
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	locked := func() int {
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_locks
			WHERE pid = pg_catalog.pg_backend_pid() AND locktype = 'relation'
			  AND relation = ANY (ARRAY['pg_catalog.pg_extension', 'pg_catalog.pg_depend']::pg_catalog.regclass[])`).Scan(&n))
		return n
	}
	require.Zero(t, locked())
	// The counter starts at 0, decades behind the clock: the first call
	// pulls it up, with a raise.
	var id int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT shard_0030.next_id()").Scan(&id))
	ms, shard, _ := decode(id)
	require.EqualValues(t, 30, shard)
	require.InDelta(t, time.Now().UnixMilli(), ms, 60_000, "the pull-up raised the counter to the clock")
	// Again, after the clock has moved on by more than the lag allowed.
	_, err = tx.Exec(ctx, "SELECT pg_catalog.pg_sleep(0.01)")
	require.NoError(t, err)
	var next int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT shard_0030.next_id()").Scan(&next))
	nextMS, _, _ := decode(next)
	require.Greater(t, nextMS, ms, "pulled up again")
	require.Zero(t, locked(), "the pull-ups ran the catalog query for the extension")
	// The advance takes the same path (a floor 5 s ahead: it raises).
	require.NoError(t, tx.QueryRow(ctx, "SELECT shard_0030.next_id_advance($1)", next+5_000<<23).Scan(&id))
	require.Zero(t, locked(), "the advance ran the catalog query for the extension")
}

// Generator v2 (as the release before this one installed it) upgraded to
// the current version while four sessions draw ids, pulling the counter
// up as they go: no id comes twice, each session's ids keep increasing,
// and the marker names the current version.
func TestUpgradeFromV2WhileDrawing(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	old, err := os.ReadFile("testdata/safe_v2_shard22.sql")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, string(old), pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	var marker string
	require.NoError(t, pool.QueryRow(ctx, "SELECT obj_description('shard_0022.next_id()'::regprocedure, 'pg_proc')").Scan(&marker))
	_, version, err := shsql.ParseMarker(marker)
	require.NoError(t, err)
	require.Equal(t, 2, version)

	ddl, err := shsql.Render(shsql.Params{Shard: 22, Generator: shsql.GeneratorPLpgSQL})
	require.NoError(t, err)
	all := make([][]int64, 4)
	g, gctx := errgroup.WithContext(ctx)
	drawBatches(gctx, g, pool, all, 150, "SELECT shard_0022.next_id() FROM generate_series(1, $1)", 40)
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		_, err := pool.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol)
		require.NoError(t, err)
	}
	require.NoError(t, g.Wait())

	var ids []int64
	for _, s := range all {
		require.Len(t, s, 150*40)
		require.True(t, slices.IsSorted(s), "a session's ids increase")
		ids = append(ids, s...)
	}
	requireUnique(t, ids)
	require.NoError(t, pool.QueryRow(ctx, "SELECT obj_description('shard_0022.next_id()'::regprocedure, 'pg_proc')").Scan(&marker))
	_, version, err = shsql.ParseMarker(marker)
	require.NoError(t, err)
	require.Equal(t, shsql.Version, version)
	requireGenerator(t, pool, "shard_0022", 22, shsql.GeneratorPLpgSQL)
}

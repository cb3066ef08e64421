package sql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// next_id() is fast because PostgreSQL inlines it: the plan of an INSERT
// using the DEFAULT, and of a SELECT, holds its expression (nextval and
// the advisory lock calls), never a call of next_id() itself. A change that
// made the body un-inlinable (a sub-SELECT, a SET clause, SECURITY
// DEFINER) would still work, several times slower per id.
func TestNextIDIsInlined(t *testing.T) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Shard: 14})
	_, err := pool.Exec(ctx, `CREATE TABLE shard_0014.likes (id bigint PRIMARY KEY DEFAULT shard_0014.next_id(), v int)`)
	require.NoError(t, err)
	for _, q := range []string{
		`EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO shard_0014.likes (v) VALUES (1)`,
		`EXPLAIN (VERBOSE, COSTS OFF) SELECT shard_0014.next_id() FROM generate_series(1, 3)`,
	} {
		var lines []string
		rows, err := pool.Query(ctx, q)
		require.NoError(t, err)
		for rows.Next() {
			var l string
			require.NoError(t, rows.Scan(&l))
			lines = append(lines, l)
		}
		require.NoError(t, rows.Err())
		plan := strings.Join(lines, "\n")
		require.Contains(t, plan, "nextval(", q)
		require.Contains(t, plan, "pg_advisory_lock_shared(", q)
		require.NotContains(t, plan, "next_id()", q)
	}
}

// The rare path of next_id(): the value it drew lags the clock, so
// next_id_pull_up() releases the session's shared lock, pulls the counter
// up, takes the lock again and draws a fresh value, and next_id() returns
// an id from it, at the clock. Afterwards the session
// holds no advisory lock (a leaked shared lock would stop every later
// pull-up of the shard).
func TestLaggingValueIsReplacedAtTheClock(t *testing.T) {
	forEachGenerator(t, testLaggingValueIsReplacedAtTheClock)
}

func testLaggingValueIsReplacedAtTheClock(t *testing.T, gen string) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	setClock := testClock(t, pool)
	install(t, pool, shsql.Params{Generator: gen, Shard: 15, Clock: "public.test_now_ms()"})
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	setClock(t0)
	first := drawIDs(t, pool, "shard_0015.next_id", 3)
	ms, _, _ := decode(first[0])
	require.Equal(t, t0, ms)

	setClock(t0 + 5000) // every value the counter holds now lags by 5 s
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var id int64
	require.NoError(t, conn.QueryRow(ctx, "SELECT shard_0015.next_id()").Scan(&id))
	ms, shard, seq := decode(id)
	require.Equal(t, t0+5000, ms, "the id carries the clock, not the lagging value")
	require.EqualValues(t, 15, shard)
	require.EqualValues(t, 1, seq, "the first value after the pull-up")
	require.Greater(t, id, first[len(first)-1])
	var held int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND pid = pg_backend_pid()`).Scan(&held))
	require.Zero(t, held, "the shared lock was released on the rare path too")
}

package sql_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newShard creates a fresh database, installs the generator described by p
// and returns a pool on that database.
func newShard(t *testing.T, p shsql.Params) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	install(t, pool, p)
	return pool
}

// install runs the generator's SQL; for the C generator it creates the
// extension in the database first (make ext installs it into the server).
func install(t *testing.T, pool *pgxpool.Pool, p shsql.Params) {
	t.Helper()
	ddl, err := shsql.Render(p)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), createExtension(p.Generator)+ddl)
	require.NoError(t, err)
	if p.Variant == "" || p.Variant == shsql.Safe {
		requireGenerator(t, pool, p.Schema, p.Shard, p.Generator)
	}
}

// decode splits an id of the default layout.
func decode(id int64) (ms, shard, seq int64) {
	return id>>23 + shsql.DefaultEpoch, id >> 10 & 8191, id & 1023
}

func requireUnique(t *testing.T, ids []int64) {
	t.Helper()
	seen := make(map[int64]struct{}, len(ids))
	dups := 0
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			dups++
		}
		seen[id] = struct{}{}
	}
	require.Zero(t, dups, "duplicate ids among %d", len(ids))
}

func countDuplicates(t *testing.T, pool *pgxpool.Pool, table string) (rows, dups int64) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*), count(*) - count(DISTINCT id) FROM "+table).Scan(&rows, &dups))
	return rows, dups
}

func TestRenderIsValidAndIdempotent(t *testing.T) {
	ctx := context.Background()
	for _, variant := range []string{shsql.Safe, shsql.Instagram} {
		t.Run(variant, func(t *testing.T) {
			p := shsql.Params{Shard: 5, Variant: variant}
			pool := newShard(t, p)
			var first int64
			require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0005.next_id()").Scan(&first))
			install(t, pool, p) // again: must not fail and must not reset anything
			var second int64
			var comment string
			require.NoError(t, pool.QueryRow(ctx,
				"SELECT shard_0005.next_id(), obj_description('shard_0005.next_id'::regproc)").Scan(&second, &comment))
			require.Greater(t, second, first)
			got, version, err := shsql.ParseMarker(comment)
			require.NoError(t, err)
			require.Equal(t, shsql.Version, version)
			require.Equal(t, shsql.Params{Shard: 5, Variant: variant, Epoch: shsql.DefaultEpoch, TimeBits: 41, ShardBits: 13, SeqBits: 10}, got)
		})
	}
}

func TestRenderRejectsBadParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    shsql.Params
		err  error
	}{
		{"unknown variant", shsql.Params{Variant: "snowflake"}, shsql.ErrVariant},
		{"shard too big", shsql.Params{Shard: 8192}, shsql.ErrLayout},
		{"negative shard", shsql.Params{Shard: -1}, shsql.ErrLayout},
		{"widths", shsql.Params{TimeBits: 40, ShardBits: 13, SeqBits: 9}, shsql.ErrLayout},
		{"negative epoch", shsql.Params{Epoch: -5}, shsql.ErrLayout},
		{"widths that wrap", shsql.Params{TimeBits: math.MaxInt, ShardBits: math.MaxInt, SeqBits: 66}, shsql.ErrLayout},
		{"shard too big for 10 shard bits", shsql.Params{Shard: 1024, TimeBits: 41, ShardBits: 10, SeqBits: 12}, shsql.ErrLayout},
		{"schema injection", shsql.Params{Schema: "x; DROP TABLE y"}, shsql.ErrSchema},
		{"schema upper case", shsql.Params{Schema: "Shard"}, shsql.ErrSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shsql.Render(tc.p)
			require.ErrorIs(t, err, tc.err)
		})
	}
}

// Two sessions bulk-inserting a million rows each into one shard serve far
// more than 1024 ids per millisecond: the case that breaks Instagram's scheme.
func TestSafeBulkConcurrentInsertsNoDuplicates(t *testing.T) {
	forEachGenerator(t, testSafeBulkConcurrentInsertsNoDuplicates)
}

func testSafeBulkConcurrentInsertsNoDuplicates(t *testing.T, gen string) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Generator: gen, Shard: 7})
	_, err := pool.Exec(ctx, "CREATE TABLE shard_0007.likes (id bigint DEFAULT shard_0007.next_id(), session int)")
	require.NoError(t, err)
	var g errgroup.Group
	for s := range 2 {
		g.Go(func() error {
			_, err := pool.Exec(ctx, "INSERT INTO shard_0007.likes (session) SELECT $1 FROM generate_series(1, 1000000)", s)
			return err
		})
	}
	require.NoError(t, g.Wait())
	rows, dups := countDuplicates(t, pool, "shard_0007.likes")
	require.EqualValues(t, 2_000_000, rows)
	require.Zero(t, dups)

	var badShard, minMS, maxMS int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE shard_0007.id_shard(id) <> 7),
		min(id >> 23) + $1, max(id >> 23) + $1 FROM shard_0007.likes`, shsql.DefaultEpoch).Scan(&badShard, &minMS, &maxMS))
	require.Zero(t, badShard, "every id carries its shard")
	// The time bits may run ahead of the clock only while the shard serves
	// more than 1024 ids per ms; they never start in the past.
	now := time.Now().UnixMilli()
	require.InDelta(t, now, minMS, float64(10*time.Minute/time.Millisecond))
}

// The published function, rewritten in plain SQL so that it is fast enough
// to exceed 1024 ids per millisecond, repeats ids: the hazard we remove.
func TestInstagramSchemeRepeatsAboveRate(t *testing.T) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Shard: 3, Variant: shsql.Instagram})
	_, err := pool.Exec(ctx, `CREATE TABLE shard_0003.plain (id bigint DEFAULT
		((FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint - 1314220021721) << 23)
		| (3 << 10) | (nextval('shard_0003.table_id_seq') % 1024))`)
	require.NoError(t, err)
	var g errgroup.Group
	for range 2 {
		g.Go(func() error {
			_, err := pool.Exec(ctx, "INSERT INTO shard_0003.plain SELECT FROM generate_series(1, 1000000)")
			return err
		})
	}
	require.NoError(t, g.Wait())
	_, dups := countDuplicates(t, pool, "shard_0003.plain")
	require.Positive(t, dups, "Instagram's scheme repeats ids above 1024 ids/ms (if this fails, the machine was too slow to show it)")
	t.Logf("instagram scheme in plain SQL: %d duplicates in 2,000,000", dups)
}

// Many sessions calling next_id() one id at a time, as an application does:
// ids are unique and strictly increase in the order each session gets them.
func TestSafeManySessionsUniqueAndIncreasing(t *testing.T) {
	forEachGenerator(t, testSafeManySessionsUniqueAndIncreasing)
}

func testSafeManySessionsUniqueAndIncreasing(t *testing.T, gen string) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Generator: gen, Shard: 11})
	const sessions, perSession = 16, 1500
	all := make([][]int64, sessions)
	var g errgroup.Group
	for s := range sessions {
		g.Go(func() error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			for i := 0; i < perSession; i++ {
				var id int64
				if err := conn.QueryRow(ctx, "SELECT shard_0011.next_id()").Scan(&id); err != nil {
					return err
				}
				if n := len(all[s]); n > 0 && id <= all[s][n-1] {
					return fmt.Errorf("session %d: id %d after %d", s, id, all[s][n-1])
				}
				all[s] = append(all[s], id)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	var ids []int64
	for _, s := range all {
		ids = append(ids, s...)
	}
	requireUnique(t, ids)
	// No session may hold the fence after its call: a leaked shared lock
	// would stop every later pull-up.
	var held int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objid = 11`, shsql.LockClass).Scan(&held))
	require.Zero(t, held)
}

// testClock installs a controllable clock (ms since the Unix epoch) and
// returns a setter.
func testClock(t *testing.T, pool *pgxpool.Pool) func(ms int64) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE public.test_clock (ms bigint NOT NULL);
		INSERT INTO public.test_clock VALUES (0);
		CREATE FUNCTION public.test_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT ms FROM public.test_clock';`)
	require.NoError(t, err)
	return func(ms int64) {
		_, err := pool.Exec(ctx, "UPDATE public.test_clock SET ms = $1", ms)
		require.NoError(t, err)
	}
}

func drawIDs(t *testing.T, pool *pgxpool.Pool, fn string, n int) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT "+fn+"() FROM generate_series(1, $1)", n)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

func TestSafeClockStepsBack(t *testing.T) { forEachGenerator(t, testSafeClockStepsBack) }

func testSafeClockStepsBack(t *testing.T, gen string) {
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	setClock := testClock(t, pool)
	install(t, pool, shsql.Params{Generator: gen, Shard: 2, Clock: "public.test_now_ms()"})
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli()

	setClock(t0)
	before := drawIDs(t, pool, "shard_0002.next_id", 5000) // > 1024 in one "ms": runs ahead
	setClock(t0 - 10_000)                                  // the host clock steps back 10 s
	after := drawIDs(t, pool, "shard_0002.next_id", 5000)
	all := append(append([]int64{}, before...), after...)
	requireUnique(t, all)
	require.True(t, sort.SliceIsSorted(all, func(i, j int) bool { return all[i] < all[j] }), "ids keep increasing across the step")
	ms, _, _ := decode(after[0])
	require.GreaterOrEqual(t, ms, t0, "the counter does not follow the clock backwards")

	setClock(t0 + 60_000) // the clock moves on: ids follow it again
	later := drawIDs(t, pool, "shard_0002.next_id", 10)
	ms, _, _ = decode(later[0])
	require.Equal(t, t0+60_000, ms)
	require.Greater(t, later[0], after[len(after)-1])
}

func TestInstagramRepeatsWhenClockStepsBack(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	setClock := testClock(t, pool)
	install(t, pool, shsql.Params{Shard: 2, Variant: shsql.Instagram, Clock: "public.test_now_ms()"})
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli()
	setClock(t0)
	ids := drawIDs(t, pool, "shard_0002.next_id", 1025) // one more than fits in a millisecond
	seen := map[int64]bool{}
	dup := false
	for _, id := range ids {
		dup = dup || seen[id]
		seen[id] = true
	}
	require.True(t, dup, "the published function repeats an id within one clock millisecond")
}

func TestSafeSurvivesCrashRestart(t *testing.T) { forEachGenerator(t, testSafeSurvivesCrashRestart) }

func testSafeSurvivesCrashRestart(t *testing.T, gen string) {
	ctx := context.Background()
	server := pgtest.Own(t, localpg.Options{})
	dsn, err := server.CreateDatabase(ctx, "app")
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	ddl, err := shsql.Render(shsql.Params{Generator: gen, Shard: 9})
	require.NoError(t, err)
	_, err = conn.Exec(ctx, createExtension(gen)+ddl+`;CREATE TABLE shard_0009.t (id bigint PRIMARY KEY DEFAULT shard_0009.next_id());
		INSERT INTO shard_0009.t SELECT FROM generate_series(1, 200000);`)
	require.NoError(t, err)
	// Push the counter ahead of the clock, as a burst or a clock step would:
	// after the crash the generator must not fall back to the clock.
	ahead := (time.Now().Add(time.Hour).UnixMilli() - shsql.DefaultEpoch) << 23
	_, err = conn.Exec(ctx, "SELECT shard_0009.next_id_advance($1)", ahead)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO shard_0009.t SELECT FROM generate_series(1, 1000)")
	require.NoError(t, err)
	var maxBefore int64
	require.NoError(t, conn.QueryRow(ctx, "SELECT max(id) FROM shard_0009.t").Scan(&maxBefore))
	require.Greater(t, maxBefore, ahead)
	conn.Close(ctx)

	require.NoError(t, server.Crash())
	require.NoError(t, server.Restart(ctx))

	conn, err = pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "INSERT INTO shard_0009.t SELECT FROM generate_series(1, 100000)")
	require.NoError(t, err, "no primary key violation after the crash")
	var minAfter int64
	require.NoError(t, conn.QueryRow(ctx, "SELECT min(id) FROM shard_0009.t WHERE id > $1", maxBefore).Scan(&minAfter))
	var total int64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM shard_0009.t").Scan(&total))
	require.EqualValues(t, 301_000, total)
}

func TestSafeReinstallNeverResets(t *testing.T) { forEachGenerator(t, testSafeReinstallNeverResets) }

func testSafeReinstallNeverResets(t *testing.T, gen string) {
	ctx := context.Background()
	p := shsql.Params{Generator: gen, Shard: 4}
	pool := newShard(t, p)
	// Someone "tunes" the counter with a cache: values would come out of
	// order across sessions. Re-installing must put it back to CACHE 1.
	_, err := pool.Exec(ctx, "ALTER SEQUENCE shard_0004.next_id_counter CACHE 50")
	require.NoError(t, err)
	before := drawIDs(t, pool, "shard_0004.next_id", 3000)
	install(t, pool, p)
	after := drawIDs(t, pool, "shard_0004.next_id", 3000)
	require.Greater(t, after[0], before[len(before)-1])
	var cache int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT cache_size FROM pg_sequences WHERE schemaname = 'shard_0004'").Scan(&cache))
	require.EqualValues(t, 1, cache)
}

// A shard restored from a backup taken before its last ids were handed out
// has a counter behind ids stored elsewhere; next_id_advance carries the
// state over so that no stored id can come again.
func TestSafeAdvanceAfterRestore(t *testing.T) { forEachGenerator(t, testSafeAdvanceAfterRestore) }

func testSafeAdvanceAfterRestore(t *testing.T, gen string) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Generator: gen, Shard: 6})
	future := (time.Now().Add(24*time.Hour).UnixMilli()-shsql.DefaultEpoch)<<23 | 6<<10 | 1000
	_, err := pool.Exec(ctx, "SELECT setval('shard_0006.next_id_counter', 1)") // the reset
	require.NoError(t, err)
	var got int64
	// Stored ids a day ahead of the clock: beyond the hour next_id_advance
	// allows without force.
	require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0006.next_id_advance($1, force => true)", future).Scan(&got))
	ids := drawIDs(t, pool, "shard_0006.next_id", 2000)
	require.Greater(t, ids[0], future)
	requireUnique(t, ids)
	// Advancing to an id behind the counter changes nothing.
	require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0006.next_id_advance(1)").Scan(&got))
	more := drawIDs(t, pool, "shard_0006.next_id", 1)
	require.Greater(t, more[0], ids[len(ids)-1])
}

// At ordinary rates the time bits track the clock closely; the bound we
// document (docs/uniqueness.md) is checked here.
func TestSafeTimeBitsTrackTheClock(t *testing.T) { forEachGenerator(t, testSafeTimeBitsTrackTheClock) }

func testSafeTimeBitsTrackTheClock(t *testing.T, gen string) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Generator: gen, Shard: 12})
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var lags []int64
	for range 300 {
		var id, nowMS int64
		require.NoError(t, conn.QueryRow(ctx,
			"SELECT shard_0012.next_id(), floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint").Scan(&id, &nowMS))
		ms, shard, _ := decode(id)
		require.EqualValues(t, 12, shard)
		require.LessOrEqual(t, ms, nowMS, "at ordinary rates the time bits never run ahead of the clock")
		lags = append(lags, nowMS-ms)
		time.Sleep(time.Duration(len(lags)%3) * time.Millisecond)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	t.Logf("time-bit lag behind the clock: median %d ms, p99 %d ms, max %d ms", lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])
	require.LessOrEqual(t, lags[len(lags)*99/100], int64(2), "p99 lag within the 1 ms pull-up threshold plus one tick")
}

func TestOtherLayoutAndDecodeHelpers(t *testing.T) {
	forEachGenerator(t, testOtherLayoutAndDecodeHelpers)
}

func testOtherLayoutAndDecodeHelpers(t *testing.T, gen string) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Generator: gen, Shard: 1000, TimeBits: 41, ShardBits: 10, SeqBits: 12, Schema: "app_1000"})
	var id int64
	var shard, seq int32
	var ts time.Time
	require.NoError(t, pool.QueryRow(ctx,
		"WITH x AS (SELECT app_1000.next_id() AS id) SELECT id, app_1000.id_shard(id), app_1000.id_seq(id), app_1000.id_time(id) FROM x").
		Scan(&id, &shard, &seq, &ts))
	require.EqualValues(t, 1000, shard)
	require.EqualValues(t, 1000, id>>12&1023)
	require.EqualValues(t, id&4095, seq)
	require.EqualValues(t, id>>22+shsql.DefaultEpoch, ts.UnixMilli())
	require.WithinDuration(t, time.Now(), ts, time.Minute)
}

// A role that may only insert into a table (and use its schema) can use the
// DEFAULT, including the pull-up path, which needs the counter's owner.
func TestPrivilegesInsertOnlyRole(t *testing.T) { forEachGenerator(t, testPrivilegesInsertOnlyRole) }

func testPrivilegesInsertOnlyRole(t *testing.T, gen string) {
	ctx := context.Background()
	server := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, server)
	pool := pgtest.Pool(t, dsn)
	install(t, pool, shsql.Params{Generator: gen, Shard: 8})
	role := fmt.Sprintf("app_%d", time.Now().UnixNano())
	_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE shard_0008.t (id bigint PRIMARY KEY DEFAULT shard_0008.next_id(), v int);
		CREATE ROLE %[1]s LOGIN; GRANT USAGE ON SCHEMA shard_0008 TO %[1]s; GRANT INSERT ON shard_0008.t TO %[1]s;
		SELECT setval('shard_0008.next_id_counter', 1);`, role)) // force the pull-up path on the next call
	require.NoError(t, err)
	t.Cleanup(func() { pool.Exec(ctx, "DROP OWNED BY "+role+"; DROP ROLE "+role) })

	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.User = role
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "INSERT INTO shard_0008.t (v) SELECT g FROM generate_series(1, 100) g")
	require.NoError(t, err)
	var n int
	var lastMS int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), max(id) >> 23 FROM shard_0008.t").Scan(&n, &lastMS))
	require.Equal(t, 100, n)
	require.InDelta(t, time.Now().UnixMilli()-shsql.DefaultEpoch, lastMS, 60_000, "the pull-up ran as the insert-only role")
}

// The rendered SQL is what `shardid sql function` prints for DBAs: psql on
// a bare database must run it, and run it again.
func TestSQLIsPsqlRunnable(t *testing.T) {
	ddl, err := shsql.RenderScript(shsql.Params{Shard: 5})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "shard_0005.sql")
	require.NoError(t, os.WriteFile(file, []byte(ddl), 0o644))
	psql := pgtest.Psql(t)
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	for range 2 {
		out, err := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", file, dsn).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	out, err := exec.Command(psql, "-X", "-Atc", "SELECT shard_0005.id_shard(shard_0005.next_id())", dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "5", strings.TrimSpace(string(out)))
}

// On a 2-core machine a shard serves fewer than 1024 ids per real
// millisecond, so the clock is frozen and jerked around instead: from the
// generator's point of view that is the same as serving far more than 1024
// ids per millisecond, with a clock stepping back and forth, while four
// sessions draw ids concurrently and the pull-up races them.
func TestSafeConcurrentWithFrozenAndJumpingClock(t *testing.T) {
	forEachGenerator(t, testSafeConcurrentWithFrozenAndJumpingClock)
}

func testSafeConcurrentWithFrozenAndJumpingClock(t *testing.T, gen string) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	setClock := testClock(t, pool)
	install(t, pool, shsql.Params{Generator: gen, Shard: 13, Clock: "public.test_now_ms()"})
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli()
	setClock(t0)

	const sessions, batches, batch = 4, 20, 1000
	all := make([][]int64, sessions)
	ticking, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ticking)
		// Forward in big steps (pull-ups), back in bigger ones (ignored).
		steps := []int64{0, 5, 5, -20, 50, -100, 200, 1, 1, -300}
		now := t0
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			now += steps[i%len(steps)]
			pool.Exec(ctx, "UPDATE public.test_clock SET ms = $1", now)
		}
	}()
	var g errgroup.Group
	drawBatches(ctx, &g, pool, all, batches, "SELECT shard_0013.next_id() FROM generate_series(1, $1)", batch)
	require.NoError(t, g.Wait())
	close(stop)
	<-ticking
	var ids []int64
	for s, got := range all {
		require.True(t, sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }), "session %d strictly increasing", s)
		ids = append(ids, got...)
	}
	require.Len(t, ids, sessions*batches*batch)
	requireUnique(t, ids)
	for _, id := range ids {
		ms, shard, _ := decode(id)
		require.EqualValues(t, 13, shard)
		require.GreaterOrEqual(t, ms, t0)
	}
}

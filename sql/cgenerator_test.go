package sql_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// The C generator takes no argument a caller chooses: its layout comes from
// its marker comment and its counter from its schema, both its owner's. A
// role that may insert (USAGE on the schema) cannot push the counter ahead:
// the raise is not its to call, the comment and the function's settings are
// the owner's, the test clock is a superuser's setting (a value the role
// set before the library loaded is dropped), and calling next_id() and the
// pull-up in a loop keeps the counter at the clock.
func TestCGeneratorParametersAreTrusted(t *testing.T) {
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	install(t, pool, shsql.Params{Generator: shsql.GeneratorC, Shard: 18})
	_, err := pool.Exec(ctx, `CREATE FUNCTION public.far_future_ms() RETURNS bigint LANGUAGE sql AS 'SELECT 2000000000000000'`)
	require.NoError(t, err)
	hostile := newRole(t, pool, dsn, "hostile", `GRANT USAGE ON SCHEMA shard_0018 TO %[1]s;`)

	// Set while the library is not loaded in the session: a placeholder the
	// library drops when it loads, as the role may not set it.
	_, _ = hostile.Exec(ctx, `SET shardid.test_clock = 'public.far_future_ms'`)
	var id int64
	require.NoError(t, hostile.QueryRow(ctx, "SELECT shard_0018.next_id()").Scan(&id))
	ms, shard, _ := decode(id)
	require.EqualValues(t, 18, shard)
	require.InDelta(t, time.Now().UnixMilli(), ms, 60_000, "the id carries the server's clock, not the role's")
	_, err = hostile.Exec(ctx, `SET shardid.test_clock = 'public.far_future_ms'`)
	requireSQLState(t, err, pgerrcode.InsufficientPrivilege)

	for _, q := range []string{
		`SELECT shardid_ext.counter_raise('shard_0018.next_id_counter', 1000000000000000)`,
		`COMMENT ON FUNCTION shard_0018.next_id() IS 'shardid generator v2 variant=safe shard=18 epoch=0 layout=41/13/10'`,
		`ALTER FUNCTION shard_0018.next_id() SET shardid.test_clock = 'public.far_future_ms'`,
		`SELECT shard_0018.next_id_advance(9000000000000000000, true)`,
		`SELECT setval('shard_0018.next_id_counter', 1000000000000000)`,
	} {
		_, err := hostile.Exec(ctx, q)
		require.Error(t, err, q)
		requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
	}
	for range 5 {
		var n int
		require.NoError(t, hostile.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 20000)
			WHERE shard_0018.next_id_pull_up() AND shard_0018.next_id() > 0`).Scan(&n))
		require.Equal(t, 20000, n)
		counter, clock := counterMS(t, pool, "shard_0018")
		require.LessOrEqual(t, counter, clock+1, "nothing the role can call takes the counter past the server's clock")
	}
}

// The C generator re-reads its layout and counter when they change (a
// re-install, a counter given to another role), in sessions that already
// used it, and refuses a counter its owner does not own.
func TestCGeneratorFollowsItsOwnersChanges(t *testing.T) {
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	p := shsql.Params{Generator: shsql.GeneratorC, Shard: 19, Schema: "app"}
	install(t, pool, p)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	next := func() (int64, error) {
		var id int64
		err := conn.QueryRow(ctx, "SELECT app.next_id()").Scan(&id)
		return id, err
	}
	id, err := next()
	require.NoError(t, err)
	_, shard, _ := decode(id)
	require.EqualValues(t, 19, shard)

	role := fmt.Sprintf("other_%d", time.Now().UnixNano())
	_, err = pool.Exec(ctx, "CREATE ROLE "+role+"; ALTER SEQUENCE app.next_id_counter OWNER TO "+role)
	require.NoError(t, err)
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	_, err = next()
	requireSQLState(t, err, pgerrcode.ObjectNotInPrerequisiteState)
	_, err = pool.Exec(ctx, "ALTER SEQUENCE app.next_id_counter OWNER TO CURRENT_USER")
	require.NoError(t, err)

	p.Shard = 20 // the owner re-installs the schema as another shard
	install(t, pool, p)
	later, err := next()
	require.NoError(t, err)
	_, shard, _ = decode(later)
	require.EqualValues(t, 20, shard, "the session follows the new marker")
	require.Greater(t, later>>23, id>>23-1)
}

// Generator c installs only where it can; auto takes C only where the
// extension is installed and the role is a superuser, PL/pgSQL elsewhere
// (a managed server, a role that may not declare a C function).
func TestGeneratorChoice(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	render := func(p shsql.Params) string {
		ddl, err := shsql.Render(p)
		require.NoError(t, err)
		return ddl
	}
	_, err := pool.Exec(ctx, render(shsql.Params{Generator: shsql.GeneratorC, Shard: 21}))
	requireSQLState(t, err, shsql.GeneratorSQLState)
	install(t, pool, shsql.Params{Shard: 21})
	requireGenerator(t, pool, "", 21, shsql.GeneratorPLpgSQL)

	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	_, err = pool.Exec(ctx, createExtension(shsql.GeneratorC))
	require.NoError(t, err)
	install(t, pool, shsql.Params{Shard: 21})
	requireGenerator(t, pool, "", 21, shsql.GeneratorC)

	owner := newRole(t, pool, dsn, "owner", `CREATE SCHEMA app_22 AUTHORIZATION %[1]s;
		DO $$ BEGIN EXECUTE pg_catalog.format('GRANT CREATE ON DATABASE %%I TO %[1]s', current_database()); END $$;`)
	_, err = owner.Exec(ctx, render(shsql.Params{Generator: shsql.GeneratorC, Shard: 22, Schema: "app_22"}))
	requireSQLState(t, err, shsql.GeneratorSQLState)
	_, err = owner.Exec(ctx, render(shsql.Params{Shard: 22, Schema: "app_22"}))
	require.NoError(t, err)
	requireGenerator(t, pool, "app_22", 22, shsql.GeneratorPLpgSQL)
	ids := drawIDs(t, pool, "app_22.next_id", 100)
	requireUnique(t, ids)
}

// Switching a shard between the two generators while sessions draw ids
// (the clock stepping back and forth, the pull-up and the advance called
// meanwhile) never repeats an id: both draw from the same counter, and every
// mover raises it atomically, forward only, where the extension is
// installed. Dropping the extension is refused while a DEFAULT uses it.
func TestGeneratorSwitchKeepsIDsUnique(t *testing.T) {
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	setClock := testClock(t, pool)
	p := shsql.Params{Generator: shsql.GeneratorC, Shard: 23, Clock: "public.test_now_ms()"}
	install(t, pool, p)
	_, err := pool.Exec(ctx, "CREATE TABLE shard_0023.t (id bigint PRIMARY KEY DEFAULT shard_0023.next_id())")
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	setClock(t0)

	const sessions, batches, batch = 3, 30, 500
	all := make([][]int64, sessions)
	var stop atomic.Bool
	var g, movers errgroup.Group
	drawBatches(ctx, &g, pool, all, batches, "INSERT INTO shard_0023.t SELECT FROM generate_series(1, $1) RETURNING id", batch)
	movers.Go(func() error { // the clock, the pull-up and a small advance
		steps := []int64{0, 5, 5, -20, 50, -100, 200, 1, 1, -300}
		now := t0
		for i := 0; !stop.Load(); i++ {
			now += steps[i%len(steps)]
			if _, err := pool.Exec(ctx, "UPDATE public.test_clock SET ms = $1", now); err != nil {
				return err
			}
			if _, err := pool.Exec(ctx, "SELECT shard_0023.next_id_pull_up(), shard_0023.next_id_advance((SELECT max(id) FROM shard_0023.t) + 2048)"); err != nil {
				return err
			}
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	})
	switches := 0
	for !stop.Load() { // re-install, alternating the form, until the sessions are done
		p.Generator = generators[switches%2]
		install(t, pool, p)
		switches++
		done := make(chan error, 1)
		go func() { done <- g.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err)
			stop.Store(true)
		case <-time.After(20 * time.Millisecond):
		}
	}
	require.NoError(t, movers.Wait())
	t.Logf("%d re-installs while %d sessions drew %d ids", switches, sessions, sessions*batches*batch)
	require.GreaterOrEqual(t, switches, 2)
	var ids []int64
	for s, got := range all {
		require.True(t, sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }), "session %d strictly increasing", s)
		ids = append(ids, got...)
	}
	require.Len(t, ids, sessions*batches*batch)
	requireUnique(t, ids)

	install(t, pool, shsql.Params{Generator: shsql.GeneratorC, Shard: 23, Clock: "public.test_now_ms()"})
	_, err = pool.Exec(ctx, "DROP EXTENSION "+shsql.ExtensionName)
	requireSQLState(t, err, pgerrcode.DependentObjectsStillExist)
}

// The C generator is planned as a plain function call, as a bigserial's
// nextval is: no body to inline, no advisory lock in the plan.
func TestCGeneratorIsOneCall(t *testing.T) {
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Generator: shsql.GeneratorC, Shard: 14})
	_, err := pool.Exec(ctx, `CREATE TABLE shard_0014.likes (id bigint PRIMARY KEY DEFAULT shard_0014.next_id(), v int)`)
	require.NoError(t, err)
	var lines []string
	rows, err := pool.Query(ctx, `EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO shard_0014.likes (v) VALUES (1)`)
	require.NoError(t, err)
	for rows.Next() {
		var l string
		require.NoError(t, rows.Scan(&l))
		lines = append(lines, l)
	}
	require.NoError(t, rows.Err())
	plan := strings.Join(lines, "\n")
	require.Contains(t, plan, "shard_0014.next_id()")
	require.NotContains(t, plan, "advisory")
}

// counter_raise, the movers' setval where the extension is installed, only
// ever moves the counter forward, and refuses a value beyond MAXVALUE as
// setval does (a move's clamp lowers MAXVALUE).
func TestCounterRaiseIsForwardOnlyAndBounded(t *testing.T) {
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Generator: shsql.GeneratorC, Shard: 24})
	raise := func(target int64) (int64, error) {
		var last int64
		err := pool.QueryRow(ctx, "SELECT shardid_ext.counter_raise('shard_0024.next_id_counter', $1)", target).Scan(&last)
		return last, err
	}
	id := drawIDs(t, pool, "shard_0024.next_id", 1)[0]
	now := id>>23<<10 | id&1023
	last, err := raise(5)
	require.NoError(t, err)
	require.Equal(t, now, last, "a raise below the counter changes nothing")
	last, err = raise(now + 10_000_000)
	require.NoError(t, err)
	require.Equal(t, now+10_000_000, last, "10 s of ids ahead of the clock")
	next := drawIDs(t, pool, "shard_0024.next_id", 1)[0]
	require.Equal(t, now+10_000_001, next>>23<<10|next&1023)
	_, err = raise(1 << 50)
	requireSQLState(t, err, pgerrcode.NumericValueOutOfRange)
}

// The pull-up and the advance run as the counter's owner (SECURITY
// DEFINER) and call shardid_ext.counter_raise only when it is the
// extension's own: a look-alike that a role with CREATE on the database
// put in a schema of that name is never called, with the extension
// installed or not.
func TestMoversNeverCallALookAlikeRaise(t *testing.T) {
	ctx := context.Background()
	for _, gen := range generators {
		t.Run(gen, func(t *testing.T) {
			if gen == shsql.GeneratorC {
				pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
			}
			dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
			pool := pgtest.Pool(t, dsn)
			install(t, pool, shsql.Params{Generator: gen, Shard: 25})
			schema := "shardid_ext"
			if gen == shsql.GeneratorC {
				schema = "public" // the extension holds shardid_ext: the look-alike goes where the search path finds it
			}
			mallory := newRole(t, pool, dsn, "mallory", `DO $$ BEGIN EXECUTE pg_catalog.format('GRANT CREATE ON DATABASE %%I TO %[1]s', current_database()); END $$;
				GRANT CREATE ON SCHEMA public TO %[1]s;`)
			if schema != "public" {
				_, err := mallory.Exec(ctx, "CREATE SCHEMA "+schema)
				require.NoError(t, err)
			}
			_, err := mallory.Exec(ctx, `CREATE FUNCTION `+schema+`.counter_raise(regclass, bigint) RETURNS bigint
				LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'look-alike called as %', current_user; END $$;
				GRANT USAGE ON SCHEMA `+schema+` TO PUBLIC`)
			require.NoError(t, err)
			for _, q := range []string{
				"SELECT setval('shard_0025.next_id_counter', 1)", // the pull-up has work to do
				"SELECT shard_0025.next_id_pull_up()",
				"SELECT shard_0025.next_id_advance((SELECT shard_0025.next_id()) + 4096)",
			} {
				_, err := pool.Exec(ctx, q)
				require.NoError(t, err, q)
			}
			counter, clock := counterMS(t, pool, "shard_0025")
			require.InDelta(t, clock, counter, 60_000, "the pull-up moved the counter to the clock")
		})
	}
}

// A layout whose shard field is 31 bits or wider, which Params allows,
// works in both generators: the ids carry the shard and the clock. Failed
// before for the C generator: it checked the marker's shard against
// 1 << shardbits computed in a C int, undefined from 31 bits on (on x86 the
// shift wraps: 1 << 32 is 1), and refused the marker of shard 5.
func TestGeneratorWideShardField(t *testing.T) {
	forEachGenerator(t, func(t *testing.T, gen string) {
		ctx := context.Background()
		epoch := time.Now().Add(-24 * time.Hour).UnixMilli() // 30 time bits: 12 days of ms
		for _, tc := range []struct{ shardBits, seqBits, shard int }{
			{32, 1, 5},
			{32, 1, 1<<31 - 1},
			{31, 2, 1<<31 - 1},
		} {
			timeBits := 63 - tc.shardBits - tc.seqBits
			schema := fmt.Sprintf("wide_%d_%d", tc.shardBits, tc.shard)
			pool := newShard(t, shsql.Params{Generator: gen, Shard: tc.shard, Schema: schema, Epoch: epoch,
				TimeBits: timeBits, ShardBits: tc.shardBits, SeqBits: tc.seqBits})
			for _, id := range drawIDs(t, pool, schema+".next_id", 50) {
				shard := id >> tc.seqBits & (1<<tc.shardBits - 1)
				ms := id>>(tc.shardBits+tc.seqBits) + epoch
				require.EqualValues(t, tc.shard, shard, "%s: id %d", schema, id)
				require.InDelta(t, time.Now().UnixMilli(), ms, 10*60_000, "%s: id %d carries the clock", schema, id)
			}
			var n int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(DISTINCT "+schema+".next_id()) FROM generate_series(1, 1000)").Scan(&n))
			require.Equal(t, 1000, n)
		}
	})
}

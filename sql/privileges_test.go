package sql_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// newRole creates a login role of this test, runs grants (with %[1]s for
// the role's name) and returns a connection as that role.
func newRole(t *testing.T, pool *pgxpool.Pool, dsn, prefix, grants string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	role := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	_, err := pool.Exec(ctx, fmt.Sprintf("CREATE ROLE %[1]s LOGIN; "+grants, role))
	require.NoError(t, err)
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.User = role
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func requireSQLState(t *testing.T, err error, code string) *pgconn.PgError {
	t.Helper()
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "want SQLSTATE %s, got %v", code, err)
	require.Equal(t, code, pe.Code, "%v", err)
	return pe
}

// counterMS is the time part of the shard's counter, in ms since the Unix
// epoch, and the server's clock.
func counterMS(t *testing.T, pool *pgxpool.Pool, schema string) (counter, clock int64) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), fmt.Sprintf(
		`SELECT (last_value >> 10) + %d, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM %s.next_id_counter`,
		shsql.DefaultEpoch, schema)).Scan(&counter, &clock))
	return counter, clock
}

// Issue 10, item 2: a role that may only insert, or only use the schema,
// cannot move the counter: the DEFAULT works, next_id_advance and setval
// are refused.
func TestPrivilegesAdvanceRefusedToInsertOnlyAndUsageOnlyRoles(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	install(t, pool, shsql.Params{Shard: 14})
	_, err := pool.Exec(ctx, `CREATE TABLE shard_0014.t (id bigint PRIMARY KEY DEFAULT shard_0014.next_id(), v int)`)
	require.NoError(t, err)
	inserter := newRole(t, pool, dsn, "ins", `GRANT USAGE ON SCHEMA shard_0014 TO %[1]s; GRANT INSERT ON shard_0014.t TO %[1]s;`)
	user := newRole(t, pool, dsn, "use", `GRANT USAGE ON SCHEMA shard_0014 TO %[1]s;`)

	_, err = inserter.Exec(ctx, "INSERT INTO shard_0014.t (v) SELECT g FROM generate_series(1, 100) g")
	require.NoError(t, err, "the insert-only role uses the DEFAULT")
	before, _ := counterMS(t, pool, "shard_0014")

	maxID := int64(1)<<62 - 1
	for name, conn := range map[string]*pgx.Conn{"insert-only": inserter, "usage-only": user} {
		t.Run(name, func(t *testing.T) {
			for _, q := range []string{
				"SELECT shard_0014.next_id_advance($1)",
				"SELECT shard_0014.next_id_advance($1, force => true)",
				"SELECT setval('shard_0014.next_id_counter', $1::bigint >> 13)",
			} {
				_, err := conn.Exec(ctx, q, maxID)
				requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
			}
		})
	}
	after, clock := counterMS(t, pool, "shard_0014")
	require.Equal(t, before, after, "the counter did not move")
	require.LessOrEqual(t, after, clock)
	_, err = inserter.Exec(ctx, "INSERT INTO shard_0014.t (v) VALUES (1)")
	require.NoError(t, err, "the generator still works")
}

// The owner may advance the counter up to an hour beyond the clock; further
// only with force, so a typo cannot burn the id space.
func TestAdvanceRefusesFloorBeyondTheClock(t *testing.T) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Shard: 15})
	idAt := func(d time.Duration) int64 {
		return (time.Now().Add(d).UnixMilli()-shsql.DefaultEpoch)<<23 | 15<<10 | 5
	}
	var got int64
	near := idAt(30 * time.Minute)
	require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0015.next_id_advance($1)", near).Scan(&got), "within the hour: no force needed")
	require.Greater(t, drawIDs(t, pool, "shard_0015.next_id", 1)[0], near)

	far := idAt(2 * time.Hour)
	err := pool.QueryRow(ctx, "SELECT shard_0015.next_id_advance($1)", far).Scan(&got)
	pe := requireSQLState(t, err, shsql.AdvanceSQLState)
	require.Contains(t, pe.Message, "ahead of the clock")
	require.Contains(t, pe.Hint, "force => true")
	next := drawIDs(t, pool, "shard_0015.next_id", 1)[0]
	require.Less(t, next, idAt(time.Hour), "the refused advance changed nothing")
	require.Greater(t, next, near)

	err = pool.QueryRow(ctx, "SELECT shard_0015.next_id_advance($1, false)", far).Scan(&got)
	requireSQLState(t, err, shsql.AdvanceSQLState)
	require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0015.next_id_advance($1, force => true)", far).Scan(&got))
	require.Greater(t, drawIDs(t, pool, "shard_0015.next_id", 1)[0], far)

	// A floor far ahead but behind the counter moves nothing and is fine.
	require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0015.next_id_advance($1)", far-1<<23).Scan(&got))
	// The lock is not left held by the refusal.
	var held int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objid = 15`,
		int64(shsql.LockClass)).Scan(&held))
	require.Zero(t, held)
}

// An installation made by the release before this one let PUBLIC execute
// next_id_advance(bigint). Running the install SQL again, with psql as a
// DBA would, drops that function and leaves nothing PUBLIC can move the
// counter with.
func TestReinstallRevokesPublicAdvance(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	old, err := os.ReadFile("testdata/safe_v1_public_advance.sql")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, string(old), pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	user := newRole(t, pool, dsn, "use", `GRANT USAGE ON SCHEMA shard_0021 TO %[1]s;`)
	var v int64
	require.NoError(t, user.QueryRow(ctx, "SELECT shard_0021.next_id_advance(1)").Scan(&v), "the old installation lets PUBLIC advance")

	ddl, err := shsql.RenderScript(shsql.Params{Shard: 21})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "shard_0021.sql")
	require.NoError(t, os.WriteFile(file, []byte(ddl), 0o644))
	psql := pgtest.Psql(t)
	out, err := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", file, dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)

	_, err = user.Exec(ctx, "SELECT shard_0021.next_id_advance(1)")
	requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
	_, err = user.Exec(ctx, "SELECT shard_0021.next_id_advance(1, true)")
	requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
	require.Equal(t, []string{"next_id_pull_up"}, publicMovers(t, pool, "shard_0021"))
	var overloads []string
	rows, err := pool.Query(ctx, `SELECT oid::regprocedure::text FROM pg_proc WHERE proname = 'next_id_advance' AND pronamespace = 'shard_0021'::regnamespace`)
	require.NoError(t, err)
	overloads, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"shard_0021.next_id_advance(bigint,boolean)"}, overloads, "the one-argument form is gone")
}

// publicMovers lists the SECURITY DEFINER functions of schema PUBLIC may
// execute, and any sequence PUBLIC may setval.
func publicMovers(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT p.proname::text FROM pg_proc p
		WHERE p.pronamespace = $1::regnamespace AND p.prosecdef
		  AND EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		UNION ALL
		SELECT c.relname::text FROM pg_class c
		WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'S'
		  AND EXISTS (SELECT FROM aclexplode(coalesce(c.relacl, acldefault('s', c.relowner))) a WHERE a.grantee = 0 AND a.privilege_type = 'UPDATE')
		ORDER BY 1`, schema)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// In every variant, nothing PUBLIC may run moves the counter arbitrarily:
// only the pull-up, which the DEFAULT needs, is a SECURITY DEFINER function
// PUBLIC may execute, and no sequence lets PUBLIC setval, even after
// someone granted it.
func TestNoCounterMoverIsPublic(t *testing.T) {
	ctx := context.Background()
	for variant, want := range map[string][]string{shsql.Safe: {"next_id_pull_up"}, shsql.Instagram: {}} {
		t.Run(variant, func(t *testing.T) {
			p := shsql.Params{Shard: 16, Variant: variant}
			pool := newShard(t, p)
			_, err := pool.Exec(ctx, `DO $$ DECLARE s regclass; BEGIN
				FOR s IN SELECT oid FROM pg_class WHERE relnamespace = 'shard_0016'::regnamespace AND relkind = 'S' LOOP
				  EXECUTE format('GRANT UPDATE ON SEQUENCE %s TO PUBLIC', s);
				END LOOP; END $$`)
			require.NoError(t, err)
			install(t, pool, p)
			require.Equal(t, want, publicMovers(t, pool, "shard_0016"))
		})
	}
}

// The pull-up stays executable by every role that inserts (the DEFAULT runs
// as its caller). It reads the server's clock, which no session can set, so
// a hostile role calling it in a loop, with every setting it can change
// changed, cannot push the counter beyond the clock: each call moves the
// counter by its one nextval at most, as nextval itself would.
func TestPullUpByHostileRoleStaysBehindClock(t *testing.T) {
	ctx := context.Background()
	ddl, err := shsql.Render(shsql.Params{Shard: 17})
	require.NoError(t, err)
	body := ddl[strings.Index(ddl, "next_id_pull_up() RETURNS"):strings.Index(ddl, "GRANT EXECUTE ON FUNCTION shard_0017.next_id_pull_up")]
	require.Contains(t, body, "pg_catalog.clock_timestamp()")
	for _, settable := range []string{"current_setting", "now()", "statement_timestamp", "transaction_timestamp", "localtimestamp", "current_timestamp"} {
		require.NotContains(t, strings.ToLower(ddl), settable, "the production SQL reads no session-settable value")
	}

	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	install(t, pool, shsql.Params{Shard: 17})
	hostile := newRole(t, pool, dsn, "hostile", `GRANT USAGE ON SCHEMA shard_0017 TO %[1]s;`)
	_, err = hostile.Exec(ctx, `SET TimeZone = 'Pacific/Kiritimati'; SET DateStyle = 'SQL, DMY'; SET IntervalStyle = 'iso_8601';
		SET search_path = pg_temp, public; SET extra_float_digits = -15`)
	require.NoError(t, err)
	for range 5 {
		var n int
		require.NoError(t, hostile.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 20000) WHERE shard_0017.next_id_pull_up()").Scan(&n))
		require.Equal(t, 20000, n)
		counter, clock := counterMS(t, pool, "shard_0017")
		require.LessOrEqual(t, counter, clock, "the pull-up never takes the counter past the server's clock")
		require.Greater(t, counter, clock-60_000, "it pulls up to the clock")
	}
}

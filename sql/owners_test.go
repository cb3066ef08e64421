package sql_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// Issue 18, item 10: a role with CREATE on a shard schema (a migration
// role) creates one of the generator's objects before the toolkit
// installs it. The install SQL, run by a superuser (whose CREATE OR
// REPLACE would otherwise keep that role as the owner of a SECURITY
// DEFINER function) or skipping an existing sequence, refuses instead,
// naming the object and its owner, and changes nothing.
func TestInstallRefusesObjectsOwnedByAnotherRole(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, create, object string }{
		{"pull-up", `CREATE FUNCTION shard_0031.next_id_pull_up() RETURNS boolean LANGUAGE sql AS 'SELECT true'`, "function shard_0031.next_id_pull_up()"},
		{"counter", `CREATE SEQUENCE shard_0031.next_id_counter`, "sequence shard_0031.next_id_counter"},
		{"fence", `CREATE FUNCTION shard_0031.shardid_fence() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'`, "function shard_0031.shardid_fence()"},
		{"advance overload", `CREATE FUNCTION shard_0031.next_id_advance(bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'`, "function shard_0031.next_id_advance(bigint)"},
		{"decode helper", `CREATE FUNCTION shard_0031.id_time(id bigint) RETURNS timestamptz LANGUAGE sql AS 'SELECT now()'`, "function shard_0031.id_time(bigint)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
			pool := pgtest.Pool(t, dsn)
			_, err := pool.Exec(ctx, `CREATE SCHEMA shard_0031`)
			require.NoError(t, err)
			migrator := newRole(t, pool, dsn, "migrator", `GRANT USAGE, CREATE ON SCHEMA shard_0031 TO %[1]s;`)
			var name string
			require.NoError(t, migrator.QueryRow(ctx, "SELECT current_user").Scan(&name))
			_, err = migrator.Exec(ctx, tc.create)
			require.NoError(t, err)

			ddl, err := shsql.Render(shsql.Params{Shard: 31})
			require.NoError(t, err)
			_, err = pool.Exec(ctx, ddl)
			pe := requireSQLState(t, err, shsql.OwnerSQLState)
			require.Contains(t, pe.Message, tc.object+" is owned by role "+name)
			require.Contains(t, pe.Message, "refusing to create or replace anything in schema shard_0031")

			var generator bool
			var owners []string
			require.NoError(t, pool.QueryRow(ctx, `SELECT to_regprocedure('shard_0031.next_id()') IS NOT NULL,
				  array(SELECT DISTINCT pg_get_userbyid(proowner)::text FROM pg_proc WHERE pronamespace = 'shard_0031'::regnamespace)`).Scan(&generator, &owners))
			require.False(t, generator, "nothing was installed")
			if tc.name != "counter" {
				require.Equal(t, []string{name}, owners, "the migration role's function was not replaced")
			}
		})
	}

	// The role that owns the objects (the toolkit's) runs the install again
	// at will: nothing is refused.
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	install(t, pool, shsql.Params{Shard: 32})
	install(t, pool, shsql.Params{Shard: 32})
}

// Issue 18, item 12: the script `shardid sql function` prints is one
// transaction, so under psql's autocommit no other session can see
// next_id_advance before its REVOKE (a new function is PUBLIC's). Shown by
// a script that fails part way: nothing it created is left behind.
func TestScriptIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	script, err := shsql.RenderScript(shsql.Params{Shard: 33})
	require.NoError(t, err)
	var stmts []string
	for _, l := range strings.Split(script, "\n") {
		if l == "BEGIN;" || l == "COMMIT;" || strings.HasPrefix(strings.ToUpper(l), "ROLLBACK") || strings.HasPrefix(strings.ToUpper(l), "END;") {
			stmts = append(stmts, l)
		}
	}
	require.Equal(t, []string{"BEGIN;", "COMMIT;"}, stmts, "one BEGIN first, one COMMIT last")
	require.Less(t, strings.Index(script, "BEGIN;"), strings.Index(script, "CREATE"))
	require.True(t, strings.HasSuffix(script, "COMMIT;\n"))

	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	pool := pgtest.Pool(t, dsn)
	// A late statement of the script fails: an id_seq(bigint) of another
	// return type, which CREATE OR REPLACE cannot change.
	_, err = pool.Exec(ctx, `CREATE SCHEMA shard_0033; CREATE FUNCTION shard_0033.id_seq(id bigint) RETURNS text LANGUAGE sql AS 'SELECT ''x'''`)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "shard_0033.sql")
	require.NoError(t, os.WriteFile(file, []byte(script), 0o644))
	psql := pgtest.Psql(t)
	out, err := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", file, dsn).CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "cannot change return type")
	var advance, counter bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regprocedure('shard_0033.next_id_advance(bigint, boolean)') IS NOT NULL,
		to_regclass('shard_0033.next_id_counter') IS NOT NULL`).Scan(&advance, &counter))
	require.False(t, advance, "next_id_advance was never visible outside the script's transaction")
	require.False(t, counter)

	_, err = pool.Exec(ctx, `DROP FUNCTION shard_0033.id_seq(bigint)`)
	require.NoError(t, err)
	out, err = exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", file, dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, []string{"next_id_pull_up"}, publicMovers(t, pool, "shard_0033"))
}

// Issue 18, item 6: next_id_advance never takes the counter more than
// AdvanceLimitMS past the clock, nor to within AdvanceReserveMS of its
// maximum, even with force: a forged id (the largest time bits) run
// through it as verify once printed would stop the generator for good.
func TestAdvanceRefusesNearMaxEvenWithForce(t *testing.T) {
	ctx := context.Background()
	pool := newShard(t, shsql.Params{Shard: 34})
	idAt := func(d time.Duration) int64 {
		return (time.Now().Add(d).UnixMilli()-shsql.DefaultEpoch)<<23 | 34<<10 | 5
	}
	before := drawIDs(t, pool, "shard_0034.next_id", 1)[0]
	maxID := int64(math.MaxInt64)
	for _, floor := range []int64{maxID, maxID &^ (1<<23 - 1), idAt(time.Duration(shsql.AdvanceLimitMS)*time.Millisecond + time.Hour)} {
		for _, q := range []string{"SELECT shard_0034.next_id_advance($1, force => true)", "SELECT shard_0034.next_id_advance($1)"} {
			var got int64
			err := pool.QueryRow(ctx, q, floor).Scan(&got)
			pe := requireSQLState(t, err, shsql.AdvanceLimitSQLState)
			require.Contains(t, pe.Message, "forced or not")
			require.Contains(t, pe.Hint, "no shardid generator made an id that far ahead")
		}
	}
	ids := drawIDs(t, pool, "shard_0034.next_id", 100)
	require.Greater(t, ids[0], before)
	requireUnique(t, ids)
	counter, clock := counterMS(t, pool, "shard_0034")
	require.LessOrEqual(t, counter, clock+1000, "the refused advances did not move the counter")

	// Within the limit, force still moves it (a restore whose stored ids
	// ran years ahead).
	nine := idAt(9 * 365 * 24 * time.Hour)
	var got int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0034.next_id_advance($1, force => true)", nine).Scan(&got))
	require.Greater(t, drawIDs(t, pool, "shard_0034.next_id", 1)[0], nine)
	var held int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objid = 34`,
		int64(shsql.LockClass)).Scan(&held))
	require.Zero(t, held, "the refusals left no lock held")
}

// In a layout that ends less than AdvanceLimitMS after the clock, the
// reserve binds: a forced advance to within a day of the counter's maximum
// is refused, one to two days before it is not.
func TestAdvanceKeepsAReserveBelowTheMaximum(t *testing.T) {
	ctx := context.Background()
	// 40 usable time bits (~34.8 years) from an epoch 33 years ago: the
	// layout ends within about two years.
	epoch := time.Now().Add(-33 * 365 * 24 * time.Hour).UnixMilli()
	p := shsql.Params{Shard: 35, Schema: "shard_0035", Epoch: epoch}
	pool := newShard(t, p)
	endMS := int64(1)<<40 - 1 // the last millisecond after the epoch
	idAtMS := func(ms int64) int64 { return ms<<23 | 35<<10 }
	var got int64
	err := pool.QueryRow(ctx, "SELECT shard_0035.next_id_advance($1, force => true)", idAtMS(endMS-3_600_000)).Scan(&got)
	requireSQLState(t, err, shsql.AdvanceLimitSQLState)
	require.NoError(t, pool.QueryRow(ctx, "SELECT shard_0035.next_id_advance($1, force => true)", idAtMS(endMS-2*shsql.AdvanceReserveMS)).Scan(&got))
	ids := drawIDs(t, pool, "shard_0035.next_id", 10)
	require.Greater(t, ids[0], idAtMS(endMS-2*shsql.AdvanceReserveMS))
	requireUnique(t, ids)
}

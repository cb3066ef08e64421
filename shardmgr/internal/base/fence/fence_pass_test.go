package fence

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

var roleCounter atomic.Int64

// role creates a login role that is no superuser on the server of dsn,
// dropped when the test ends, and returns its name and dsn as that role.
func role(t *testing.T, dsn, prefix string) (string, string) {
	t.Helper()
	c := ctx(t)
	name := fmt.Sprintf("%s_fence_%d", prefix, roleCounter.Add(1))
	q := pgx.Identifier{name}.Sanitize()
	admin, err := pgx.Connect(c, dsn)
	require.NoError(t, err)
	_, err = admin.Exec(c, "CREATE ROLE "+q+" LOGIN")
	admin.Close(c)
	require.NoError(t, err)
	t.Cleanup(func() {
		c := context.Background()
		if admin, err := pgx.Connect(c, dsn); err == nil {
			admin.Exec(c, "DROP OWNED BY "+q+" CASCADE")
			admin.Exec(c, "DROP ROLE "+q)
			admin.Close(c)
		}
	})
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(name)
	return name, u.String()
}

// A fence refuses an application role's write whatever settings it gives
// itself: the old bypass setting by SET, by ALTER ROLE ... SET, or in the
// connection string's options, and a table named like the mover's pass
// in its own temporary schema. The role that owns the fence passes it,
// in the transaction that holds its pass only.
func TestFenceRefusesEveryRoleButTheMover(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	db := pgtest.Pool(t, dsn)
	c := ctx(t)
	app, appDSN := role(t, dsn, "app")
	qa := pgx.Identifier{app}.Sanitize()
	_, err := db.Exec(c, `CREATE SCHEMA s; CREATE TABLE s.t (id int PRIMARY KEY);
		GRANT USAGE ON SCHEMA s TO `+qa+`; GRANT SELECT, INSERT, UPDATE, DELETE ON s.t TO `+qa)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(c, db, func(tx pgx.Tx) error { return Install(c, tx, "s", true) }))

	insert := func(dsn string, pre ...string) error {
		conn, err := pgx.Connect(c, dsn)
		require.NoError(t, err)
		defer conn.Close(c)
		return pgx.BeginFunc(c, conn, func(tx pgx.Tx) error {
			for _, sql := range pre {
				if _, err := tx.Exec(c, sql); err != nil {
					return err
				}
			}
			_, err := tx.Exec(c, `INSERT INTO s.t VALUES ((SELECT coalesce(max(id), 0) + 1 FROM s.t))`)
			return err
		})
	}
	err = insert(appDSN)
	require.True(t, IsFenceError(err), "plain insert: %v", err)
	err = insert(appDSN, `SET shardid.fence_bypass = on`)
	require.True(t, IsFenceError(err), "SET: %v", err)
	err = insert(appDSN, `SELECT set_config('shardid.fence_bypass', 'on', true)`)
	require.True(t, IsFenceError(err), "set_config: %v", err)
	err = insert(appDSN, PassSQL)
	require.True(t, IsFenceError(err), "a pass of its own: %v", err)
	u, err := url.Parse(appDSN)
	require.NoError(t, err)
	u.RawQuery = "options=-c%20shardid.fence_bypass%3Don"
	isSet := `DO $$ BEGIN IF current_setting('shardid.fence_bypass', true) IS DISTINCT FROM 'on' THEN RAISE 'not set'; END IF; END $$`
	err = insert(u.String(), isSet)
	require.True(t, IsFenceError(err), "options: %v", err)
	_, err = db.Exec(c, `ALTER ROLE `+qa+` SET shardid.fence_bypass = on`)
	require.NoError(t, err)
	err = insert(appDSN, isSet)
	require.True(t, IsFenceError(err), "ALTER ROLE SET: %v", err)

	// The mover passes with its pass, and only in that transaction.
	require.NoError(t, insert(dsn, PassSQL))
	err = insert(dsn)
	require.True(t, IsFenceError(err), "the mover without a pass: %v", err)
	var n int
	require.NoError(t, db.QueryRow(c, `SELECT count(*) FROM s.t`).Scan(&n))
	require.Equal(t, 1, n)

	// The application may not call the fence function, nor replace it.
	var canExec bool
	require.NoError(t, db.QueryRow(c, `SELECT has_function_privilege($1, 's.shardid_fence()', 'EXECUTE')`, app).Scan(&canExec))
	require.False(t, canExec, "PUBLIC keeps EXECUTE on the fence function")
}

// A role with CREATE on a shard's schema that made a function named like
// the fence before the toolkit did cannot have it kept: Func and Install
// refuse, naming the function and its owner, and the application's write
// stays refused.
func TestFenceRefusesForeignFunction(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	db := pgtest.Pool(t, dsn)
	c := ctx(t)
	migrator, migratorDSN := role(t, dsn, "migrator")
	qm := pgx.Identifier{migrator}.Sanitize()
	_, err := db.Exec(c, `CREATE SCHEMA s; CREATE TABLE s.t (id int PRIMARY KEY);
		GRANT USAGE, CREATE ON SCHEMA s TO `+qm+`; GRANT INSERT ON s.t TO `+qm)
	require.NoError(t, err)
	mconn, err := pgx.Connect(c, migratorDSN)
	require.NoError(t, err)
	defer mconn.Close(c)
	_, err = mconn.Exec(c, `CREATE FUNCTION s.shardid_fence() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`)
	require.NoError(t, err)

	for name, install := range map[string]func(tx pgx.Tx) error{
		"Func":    func(tx pgx.Tx) error { return Func(c, tx, "s", true) },
		"Install": func(tx pgx.Tx) error { return Install(c, tx, "s", true) },
	} {
		err = pgx.BeginFunc(c, db, install)
		require.ErrorIs(t, err, ErrForeignOwner, name)
		require.ErrorContains(t, err, `s.shardid_fence()`, name)
		require.ErrorContains(t, err, migrator, name)
	}
	_, err = mconn.Exec(c, `INSERT INTO s.t VALUES (1)`)
	require.NoError(t, err, "no fence was installed")
	// With the foreign function gone, the fence is the toolkit's and
	// refuses the migrator's write.
	_, err = db.Exec(c, `DROP FUNCTION s.shardid_fence()`)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(c, db, func(tx pgx.Tx) error { return Install(c, tx, "s", true) }))
	_, err = mconn.Exec(c, `INSERT INTO s.t VALUES (2)`)
	require.True(t, IsFenceError(err), "%v", err)
}

package pgdatabase_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/pgdatabase"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// missingDSN names a database that does not exist yet on the shared
// server, without sslmode: pgx then tries TLS first, as a user's DSN does.
func missingDSN(t *testing.T) string {
	s := pgtest.Servers(t, 1)[0]
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/missing_%d", s.Port, time.Now().UnixNano())
}

func TestEnsureCreatesOnceUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	dsn := missingDSN(t)
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgdatabase.Ensure(ctx, dsn)
			require.NoError(t, err)
			if c {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, created.Load())
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	conn.Close(ctx)
	c, err := pgdatabase.Ensure(ctx, dsn)
	require.NoError(t, err)
	require.False(t, c, "an existing database is left alone")
}

// Ensure's failed connection names the database, with the server's
// reason first when the server gave one (pgsession.ServerFirst), else the
// error as it was.
func TestEnsureSaysWhyItCannotConnect(t *testing.T) {
	s := pgtest.Servers(t, 1)[0]
	_, err := pgdatabase.Ensure(context.Background(), fmt.Sprintf("postgres://no_such_role_%d@127.0.0.1:%d/x", time.Now().UnixNano(), s.Port))
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "connect to x: FATAL: role "), err.Error())
	require.Contains(t, err.Error(), "does not exist (SQLSTATE 28000)")

	_, err = pgdatabase.Ensure(context.Background(), "postgres://postgres@127.0.0.1:1/x?connect_timeout=2")
	require.ErrorContains(t, err, "connect to x", "no server message: the error as it was")
}

// PUBLIC holds CONNECT on a new database until someone revokes it.
func TestPublicCanConnect(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	db := conn.Config().Database
	open, err := pgdatabase.PublicCanConnect(ctx, conn, db)
	require.NoError(t, err)
	require.True(t, open, "the default")
	_, err = conn.Exec(ctx, "REVOKE CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM PUBLIC")
	require.NoError(t, err)
	open, err = pgdatabase.PublicCanConnect(ctx, conn, db)
	require.NoError(t, err)
	require.False(t, open)
	_, err = conn.Exec(ctx, "GRANT CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO PUBLIC")
	require.NoError(t, err)
	open, err = pgdatabase.PublicCanConnect(ctx, conn, db)
	require.NoError(t, err)
	require.True(t, open)
}

// The holder of an advisory lock is named by pid, role and application;
// the caller's own hold is not listed.
func TestAdvisoryLockHolders(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	me, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer me.Close(ctx)
	_, err = me.Exec(ctx, "CREATE ROLE lockholder_"+fmt.Sprint(time.Now().UnixNano()%1e9)+" LOGIN")
	require.NoError(t, err)
	var role string
	require.NoError(t, me.QueryRow(ctx, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'lockholder_%' ORDER BY oid DESC LIMIT 1").Scan(&role))
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.User = role
	cfg.RuntimeParams["application_name"] = "holder app"
	other, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer other.Close(ctx)
	const key = int64(5_000_000_123) // above 2^32: both halves of pg_locks' key
	_, err = other.Exec(ctx, "SELECT pg_advisory_lock($1)", key)
	require.NoError(t, err)
	_, err = me.Exec(ctx, "SELECT pg_advisory_lock($1)", key+1)
	require.NoError(t, err)

	holders, err := pgdatabase.AdvisoryLockHolders(ctx, me, key)
	require.NoError(t, err)
	require.Len(t, holders, 1)
	require.Equal(t, other.PgConn().PID(), uint32(holders[0].PID))
	require.Equal(t, role, holders[0].Role)
	require.Equal(t, "pid "+fmt.Sprint(other.PgConn().PID())+", role "+role+", application holder app", pgdatabase.Holders(holders))
	holders, err = pgdatabase.AdvisoryLockHolders(ctx, me, key+1)
	require.NoError(t, err)
	require.Empty(t, holders, "our own hold is not someone else's")
}

package localpg_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestStartSettingsAndDatabase(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, s)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var walLevel, fsync string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('fsync')").Scan(&walLevel, &fsync))
	require.Equal(t, "logical", walLevel)
	require.Equal(t, "off", fsync)
}

func TestSeveralServersAtOnce(t *testing.T) {
	servers := pgtest.Servers(t, 3)
	ports := map[int]bool{}
	for _, s := range servers {
		ports[s.Port] = true
	}
	require.Len(t, ports, 3, "each server has its own port")
}

func TestCrashAndRestartKeepsCommittedData(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Own(t, localpg.Options{})
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	require.NoError(t, err)
	conn.Close(ctx)

	require.NoError(t, s.Crash())
	require.NoError(t, s.Restart(ctx))

	conn, err = pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v int
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, 42, v)
}

func TestBadBinDirIsAClearError(t *testing.T) {
	_, err := localpg.Start(context.Background(), localpg.Options{BinDir: t.TempDir()})
	require.ErrorContains(t, err, "initdb")
}

func TestDetachedServerIsFoundAgainByItsDirectory(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(pgtest.ReachableTempDir(t), "pg1")
	s, err := localpg.StartDetached(ctx, dir, localpg.Options{Settings: map[string]string{"wal_retrieve_retry_interval": "200ms"}})
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	_, err = localpg.StartDetached(ctx, dir, localpg.Options{})
	require.ErrorContains(t, err, "already holds a server")

	found, err := localpg.Open(dir, localpg.Options{})
	require.NoError(t, err)
	require.Equal(t, s.Port, found.Port)
	require.True(t, found.Running())
	require.Error(t, found.Restart(ctx), "a running server is not started twice")

	// Stopped through the handle that did not start it, then started again.
	require.NoError(t, found.Halt())
	require.False(t, s.Running())
	require.NoError(t, found.Restart(ctx))
	conn, err := pgx.Connect(ctx, found.DSN("postgres"))
	require.NoError(t, err)
	var retry, wal string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('wal_retrieve_retry_interval'), current_setting('wal_level')").Scan(&retry, &wal))
	conn.Close(ctx)
	require.Equal(t, "200ms", retry, "the settings live in the data directory")
	require.Equal(t, "logical", wal)

	require.NoError(t, found.Stop())
	require.NoDirExists(t, dir)
	_, err = localpg.Open(dir, localpg.Options{})
	require.ErrorIs(t, err, localpg.ErrNoServer)
}

func TestPgBouncerInFrontOfAServer(t *testing.T) {
	t.Parallel()
	s := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, s)
	for _, mode := range []string{localpg.PoolTransaction, localpg.PoolSession} {
		t.Run(mode, func(t *testing.T) {
			b := pgtest.Bouncer(t, s, localpg.BouncerOptions{PoolMode: mode, PoolSize: 1})
			ctx := context.Background()
			a, err := pgx.Connect(ctx, b.Via(dsn))
			require.NoError(t, err)
			defer a.Close(ctx)
			var db string
			require.NoError(t, a.QueryRow(ctx, `SELECT current_database()`, pgx.QueryExecModeSimpleProtocol).Scan(&db))
			require.True(t, strings.HasPrefix(db, "t"), db)
			// With one server connection, a second client gets the
			// first one's server only where the pooler hands servers out
			// per transaction.
			c, err := pgx.Connect(ctx, b.Via(dsn))
			require.NoError(t, err)
			defer c.Close(ctx)
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var pid1, pid2 int
			require.NoError(t, a.QueryRow(qctx, `SELECT pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol).Scan(&pid1))
			err = c.QueryRow(qctx, `SELECT pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol).Scan(&pid2)
			if mode == localpg.PoolTransaction {
				require.NoError(t, err)
				require.Equal(t, pid1, pid2)
			} else {
				require.Error(t, err) // waits for a's server until the timeout
			}
		})
	}
}

// SHARDID_PG_BIN chooses the binaries (make test-versions runs the suite
// on each major's bundle that way); a directory without them is refused,
// naming the variable and what is missing.
func TestBinEnvChoosesTheBinaries(t *testing.T) {
	system, err := localpg.FindBinDir()
	require.NoError(t, err)
	empty := t.TempDir()
	t.Setenv(localpg.BinEnv, empty)
	_, err = localpg.FindBinDir()
	require.EqualError(t, err, "localpg: SHARDID_PG_BIN="+empty+" has no initdb")
	t.Setenv(localpg.BinEnv, system)
	dir, err := localpg.FindBinDir()
	require.NoError(t, err)
	require.Equal(t, system, dir)
}

// NewAsyncStandby works on every major's binaries: with pg_basebackup
// where they have it (Debian's), by a copy of the data directory where
// they do not (the bundles of make test-versions, SHARDID_PG_BIN).
func TestAsyncStandbyFollowsItsPrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := pgtest.Own(t, localpg.Options{})
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)`)
	require.NoError(t, err)
	st, err := s.NewAsyncStandby(ctx)
	require.NoError(t, err)
	defer st.Stop()
	_, err = conn.Exec(ctx, `INSERT INTO kept VALUES (2)`)
	require.NoError(t, err)
	require.NoError(t, s.WaitReplayed(ctx, st, 2*time.Minute))
	sc, err := pgx.Connect(ctx, st.DSN("postgres"))
	require.NoError(t, err)
	defer sc.Close(ctx)
	var n int
	var recovery bool
	require.NoError(t, sc.QueryRow(ctx, `SELECT count(*), pg_catalog.pg_is_in_recovery() FROM kept`).Scan(&n, &recovery))
	require.Equal(t, 2, n)
	require.True(t, recovery)
}

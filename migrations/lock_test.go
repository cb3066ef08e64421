package migrations_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/migrations/migrationstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A role that holds golang-migrate's lock makes Up give up within its
// bound, naming the holder, and a cancelled context ends the wait at once.
func TestUpGivesUpOnAHeldLockAndNamesTheHolder(t *testing.T) {
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	holder := migrationstest.HoldMigrationLock(t, dsn, migrations.Segment, "lockhog")
	var log bytes.Buffer
	start := time.Now()
	err := migrations.Up(context.Background(), dsn, migrations.Segment,
		migrations.WithLockWait(2*time.Second), migrations.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	took := time.Since(start)
	var busy *migrations.LockBusyError
	require.ErrorAs(t, err, &busy)
	require.Contains(t, err.Error(), fmt.Sprintf("pid %d", holder.PgConn().PID()))
	require.Contains(t, err.Error(), "role hostile_")
	require.Contains(t, err.Error(), "application lockhog")
	require.Less(t, took, time.Minute, "bounded")
	require.Contains(t, log.String(), "waiting for golang-migrate's advisory lock")
	require.Contains(t, log.String(), "application lockhog")

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	start = time.Now()
	err = migrations.Up(ctx, dsn, migrations.Segment, migrations.WithLockWait(time.Hour))
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 5*time.Second, "a cancelled context ends the wait")

	// Once the lock goes, Up works.
	require.NoError(t, holder.Close(context.Background()))
	require.NoError(t, migrations.Up(context.Background(), dsn, migrations.Segment, migrations.WithLockWait(time.Minute)))
}

// A run cancelled while a migration is under way returns once that
// migration is done, not in its middle: a process that exits when Up
// returns (serve on SIGTERM) must not leave the version dirty.
func TestUpCancelledMidMigrationLeavesNoDirtyVersion(t *testing.T) {
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	slow := migrations.Set{Name: "slow", Table: "slow_migrations", FS: fstest.MapFS{
		"1_slow.up.sql":   {Data: []byte("SELECT pg_catalog.pg_sleep(3); CREATE TABLE slow_done (x int);")},
		"1_slow.down.sql": {Data: []byte("DROP TABLE slow_done;")},
	}}
	watch, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer watch.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the migration's statement runs.
		for ctx.Err() == nil {
			var n int
			if watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_catalog.pg_sleep(3)%'`).Scan(&n) == nil && n > 0 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	err = migrations.Up(ctx, dsn, slow, migrations.WithLockWait(time.Minute))
	require.ErrorIs(t, err, context.Canceled)
	// Read at once, as a process about to exit would leave it (Version
	// would wait for golang-migrate's lock, hence for the migration).
	var version int64
	var dirty bool
	require.NoError(t, watch.QueryRow(context.Background(),
		`SELECT version, dirty FROM `+migrations.Schema+`.slow_migrations`).Scan(&version, &dirty))
	require.False(t, dirty, "Up returned in the middle of a migration")
	require.Equal(t, int64(1), version)
}

// A value an option cannot use fails Up before it connects, naming the
// option; WithLogger(nil) is one, as in every package (shardmgr's
// doc.go). Failed before: WithLogger(nil) was taken and WithLockWait(0)
// silently meant DefaultLockWait.
func TestOptionsAreCheckedAndNamed(t *testing.T) {
	for name, opt := range map[string]migrations.Option{
		"WithLogger(nil)":  migrations.WithLogger(nil),
		"WithLockWait(0s)": migrations.WithLockWait(0),
	} {
		err := migrations.Up(context.Background(), "postgres://nobody@127.0.0.1:1/none", migrations.Catalog, opt)
		require.ErrorContains(t, err, "migrations: "+name+": want ")
	}
}

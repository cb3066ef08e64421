package migrations_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

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

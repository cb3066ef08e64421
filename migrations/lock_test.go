package migrations_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// holdMigrationLock connects to dsn's database as a fresh role with no
// privilege beyond PUBLIC's CONNECT, with application_name app, and takes
// golang-migrate's lock for set, as anyone who can connect may. The lock
// goes with the returned connection.
func holdMigrationLock(t *testing.T, dsn string, set migrations.Set, app string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(ctx)
	role := fmt.Sprintf("hostile_%d", time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
	require.NoError(t, err)
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.User = role
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	s, err := database.GenerateAdvisoryLockId(cfg.Database, migrations.Schema, set.Table)
	require.NoError(t, err)
	key, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key)
	require.NoError(t, err)
	return conn
}

// A role that holds golang-migrate's lock makes Up give up within its
// bound, naming the holder, and a cancelled context ends the wait at once.
func TestUpGivesUpOnAHeldLockAndNamesTheHolder(t *testing.T) {
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	holder := holdMigrationLock(t, dsn, migrations.Segment, "lockhog")
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

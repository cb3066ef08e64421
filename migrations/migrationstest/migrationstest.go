// Package migrationstest holds what tests of several packages need of the
// toolkit's migration sets: a hostile session holding golang-migrate's
// lock. It is imported only from _test.go files.
package migrationstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/migrations"
)

// HoldMigrationLock connects to dsn's database as a fresh role with no
// privilege beyond PUBLIC's CONNECT, with application_name app, and takes
// golang-migrate's lock for set, as anyone who can connect may. The lock
// goes with the returned connection (closed when the test ends).
func HoldMigrationLock(t *testing.T, dsn string, set migrations.Set, app string) *pgx.Conn {
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
	key, err := migrations.LockKey(cfg.Database, set)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key)
	require.NoError(t, err)
	return conn
}

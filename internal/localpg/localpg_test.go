package localpg_test

import (
	"context"
	"testing"

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

package localpg

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A standby made by copying the data directory between pg_backup_start
// and pg_backup_stop (what NewAsyncStandby does where the binaries have
// no pg_basebackup: the bundles of make test-versions) replays what its
// primary writes after the copy, and can be promoted, on whichever major
// SHARDID_PG_BIN chooses (pg_start_backup on 14).
func TestStandbyByDataDirectoryCopy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	require.NoError(t, err)
	defer s.Stop()
	exec := func(srv *Server, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		require.NoError(t, err)
	}
	count := func(srv *Server) (n int) {
		t.Helper()
		conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
		require.NoError(t, err)
		defer conn.Close(ctx)
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n))
		return n
	}
	exec(s, `CREATE TABLE kept (v int); INSERT INTO kept SELECT generate_series(1, 1000)`)

	st, err := s.newAsyncStandby(ctx, false, nil)
	require.NoError(t, err)
	defer st.Stop()
	exec(s, `INSERT INTO kept SELECT generate_series(1001, 2000)`)
	require.NoError(t, s.WaitReplayed(ctx, st, 2*time.Minute))
	require.Equal(t, 2000, count(st))

	require.NoError(t, st.Promote(ctx, 2*time.Minute))
	exec(st, `INSERT INTO kept VALUES (2001)`)
	require.Equal(t, 2001, count(st))
	require.Equal(t, 2000, count(s))
}

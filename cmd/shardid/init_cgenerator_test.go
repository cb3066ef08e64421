package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

var cgenRoles atomic.Int64

// generator: c through a role that is not a superuser (managed
// PostgreSQL) is refused before init changes anything, in one line that
// names generator: auto; no database is created.
func TestInitCGeneratorNonSuperuserCLI(t *testing.T) {
	ctx := context.Background()
	servers := pgtest.Servers(t, 3)
	role := fmt.Sprintf("cgen_cli_%d_%d", os.Getpid(), cgenRoles.Add(1))
	q := pgx.Identifier{role}.Sanitize()
	for _, s := range servers {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE ROLE "+q+" LOGIN CREATEDB")
		require.NoError(t, err)
		conn.Close(ctx)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			conn, err := pgx.Connect(ctx, s.DSN("postgres"))
			if err != nil {
				continue
			}
			_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+q)
			conn.Close(ctx)
		}
	})
	asRole := func(s interface{ DSN(string) string }, db string) string {
		dsn := s.DSN(db)
		i := strings.Index(dsn, "://")
		j := strings.Index(dsn, "@")
		require.True(t, i >= 0 && j > i, dsn)
		return dsn[:i+3] + role + dsn[j:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: cgen\nshards: 3\ngenerator: c\ncatalog: %s\nhosts:\n", asRole(servers[0], role+"_catalog"))
	for i, s := range servers {
		fmt.Fprintf(&b, "  - name: pg%d\n    dsn: %s\n", i+1, asRole(s, fmt.Sprintf("%s_h%d", role, i+1)))
	}
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))

	_, stderr, code := runClusterCmdStderr(t, "init", "--config", path)
	require.Equal(t, 1, code, stderr)
	last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
	require.Contains(t, last, "the C generator cannot be installed: the host's role is not a superuser")
	require.Contains(t, last, "set generator: auto in the cluster file")

	for _, s := range servers {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		require.NoError(t, err)
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE $1`, role+"%").Scan(&n))
		conn.Close(ctx)
		require.Zero(t, n, "init created a database")
	}
}

package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// TestStatusRefusedPrintsTheServersReason: status as a role whose CONNECT
// on the catalog's database PUBLIC no longer holds (sslmode=prefer, as a
// DSN without settings is) prints one line that starts with the server's
// reason, not with "failed to connect" and pgconn's "tls error: server
// refused TLS connection" from the first attempt (failed before: the
// reason came after both).
func TestStatusRefusedPrintsTheServersReason(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Servers(t, 1)[0]
	role := fmt.Sprintf("refused_cli_%d_%d", os.Getpid(), cgenRoles.Add(1))
	q := pgx.Identifier{role}.Sanitize()
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE ROLE "+q+" LOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, s.DSN("postgres")); err == nil {
			_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+q)
			conn.Close(ctx)
		}
	})
	catalog := pgtest.NewDB(t, s)
	host := pgtest.NewDB(t, s)
	u, err := url.Parse(catalog)
	require.NoError(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	_, err = admin.Exec(ctx, "REVOKE CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM PUBLIC")
	require.NoError(t, err)
	u.User = url.User(role)
	u.RawQuery = "" // sslmode=prefer: a TLS attempt first, which the server refuses
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf("cluster: refused\nshards: 4\ncatalog: %s\nhosts:\n  - name: pg1\n    dsn: %s\n", u, host)), 0o600))

	stdout, stderr, code := runClusterCmdStderr(t, "status", "--config", path)
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stdout)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	require.Len(t, lines, 1, "one line: %s", stderr)
	require.True(t, strings.HasPrefix(lines[0], "shardid: "), lines[0])
	first := strings.SplitN(lines[0], ";", 2)[0]
	require.Contains(t, first, "permission denied for database", "the server's reason first: %s", lines[0])
	require.NotContains(t, first, "tls error", lines[0])
}

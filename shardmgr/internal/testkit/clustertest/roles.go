package clustertest

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

// Role creates a login role, neither superuser nor anything else, on every
// server of cfg, named prefix and a number of this run; it is dropped (with
// everything it owns or was granted in cfg's databases) when the test
// ends. Roles belong to a server, not a database, so the name is unique.
func Role(t testing.TB, cfg *shardmgr.Config, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, DBCounter.Add(1))
	q := pgx.Identifier{name}.Sanitize()
	dsns := []string{cfg.Catalog}
	for _, h := range cfg.Hosts {
		dsns = append(dsns, h.DSN)
	}
	ctx := context.Background()
	seen := map[string]bool{}
	for _, dsn := range dsns[1:] {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		if seen[u.Host] {
			continue
		}
		seen[u.Host] = true
		u.Path = "/postgres" // the host's database may not exist yet
		conn, err := pgx.Connect(ctx, u.String())
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE ROLE "+q+" LOGIN")
		conn.Close(ctx)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, dsn := range dsns {
			if conn, err := pgx.Connect(ctx, dsn); err == nil {
				conn.Exec(ctx, "DROP OWNED BY "+q+" CASCADE")
				conn.Close(ctx)
			}
		}
		for _, dsn := range dsns[1:] {
			u, err := url.Parse(dsn)
			if err != nil {
				continue
			}
			u.Path = "/postgres"
			if conn, err := pgx.Connect(ctx, u.String()); err == nil {
				conn.Exec(ctx, "DROP ROLE IF EXISTS "+q)
				conn.Close(ctx)
			}
		}
	})
	return name
}

// AsRole is dsn (a URL) connecting as role.
func AsRole(t testing.TB, dsn, role string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	return u.String()
}

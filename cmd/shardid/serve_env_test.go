package main

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// envRoles numbers the roles these tests create (roles belong to a
// server, which the package's tests share).
var envRoles atomic.Int64

// serve as a role that is not a superuser (a managed service's: its
// databases made for it, CREATE DATABASE ... OWNER it): it migrates its
// segment source and its lease database itself (the owner may create
// schema shardid) and hands out segment and snowflake ids.
func TestServeAsNonSuperuser(t *testing.T) {
	srv := pgtest.Servers(t, 1)[0]
	seg, leases := pgtest.NewDB(t, srv), pgtest.NewDB(t, srv)
	role := fmt.Sprintf("managed_serve_%d", envRoles.Add(1))
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(ctx)
	q := pgx.Identifier{role}.Sanitize()
	_, err = admin.Exec(ctx, "CREATE ROLE "+q+" LOGIN NOSUPERUSER")
	require.NoError(t, err)
	asRole := func(dsn string) string {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{u.Path[1:]}.Sanitize()+" OWNER TO "+q)
		require.NoError(t, err)
		t.Cleanup(func() { // before the database is dropped, the role with what it owns there
			if c, err := pgx.Connect(ctx, dsn); err == nil {
				c.Exec(ctx, "DROP OWNED BY "+q+" CASCADE")
				c.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{u.Path[1:]}.Sanitize()+" OWNER TO postgres")
				c.Close(ctx)
			}
		})
		u.User = url.User(role)
		return u.String()
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, srv.DSN("postgres")); err == nil {
			c.Exec(ctx, "DROP ROLE IF EXISTS "+q)
			c.Close(ctx)
		}
	})
	seg, leases = asRole(seg), asRole(leases)
	require.False(t, pgtest.Superuser(t, srv.DSN("postgres"), role))
	serveDraws(t, seg, leases)
	// serve migrated them as the role: it owns what it made.
	var owner string
	require.NoError(t, pgtest.Pool(t, leases).QueryRow(ctx, `SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'shardid'`).Scan(&owner))
	require.Equal(t, role, owner)
}

// serve over TLS with sslmode=verify-full (a CA of the test's own, the
// role refused without TLS): it migrates its databases and hands out ids
// over connections that verify the server's certificate.
func TestServeOverVerifyFullTLS(t *testing.T) {
	tls := pgtest.NewTLS(t)
	role := fmt.Sprintf("tls_serve_%d", envRoles.Add(1))
	srv := tls.Server(t, role)
	pgtest.RequireTLSOnly(t, srv, role)
	ctx := context.Background()
	for _, db := range []string{"seg", "leases"} {
		_, err := srv.CreateDatabase(ctx, db)
		require.NoError(t, err)
	}
	serveDraws(t, tls.DSN(srv, role, "seg"), tls.DSN(srv, role, "leases"))
}

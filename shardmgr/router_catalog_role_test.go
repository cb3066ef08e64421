package shardmgr_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
)

// A routing role (no superuser, owning nothing) without SELECT on
// shardid.catalog_readers cannot open a router, as docs/upgrading.md
// says (failed before: it opened, and would have failed only on the day
// the catalog was upgraded past it). With CONNECT on the catalog's
// database revoked, the error leads with the server's reason, not with
// pgconn's "server refused TLS connection" from the first attempt of
// sslmode=prefer (failed before).
func TestRouterOpenAsRoleNeedsCatalogReaders(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 2)
	role := clustertest.Role(t, cfg, "router")
	q := pgx.Identifier{role}.Sanitize()
	exec := func(sql string) {
		t.Helper()
		_, err := pool(t, cfg.Catalog).Exec(ctx(t), sql)
		require.NoError(t, err)
	}
	exec(`GRANT USAGE ON SCHEMA shardid TO ` + q + `;
		GRANT SELECT ON shardid.cluster, shardid.hosts, shardid.shards, shardid.catalog_migrations TO ` + q)
	dsn := clustertest.AsRole(t, cfg.Catalog, role)

	_, err := shardmgr.OpenCatalog(ctx(t), dsn, shardmgr.WithRefreshInterval(0))
	require.Error(t, err)
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, pgerrcode.InsufficientPrivilege, pe.Code)
	require.Contains(t, err.Error(), "shardid.catalog_readers")

	exec(`GRANT SELECT ON shardid.catalog_readers TO ` + q)
	r, err := shardmgr.OpenCatalog(ctx(t), dsn, shardmgr.WithRefreshInterval(0))
	require.NoError(t, err, "the grants docs/upgrading.md lists are enough")
	r.Close()

	var db string
	require.NoError(t, pool(t, cfg.Catalog).QueryRow(ctx(t), `SELECT current_database()`).Scan(&db))
	exec(`REVOKE CONNECT ON DATABASE ` + pgx.Identifier{db}.Sanitize() + ` FROM PUBLIC`)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.RawQuery = "" // sslmode=prefer: a TLS attempt first, which the server refuses
	_, err = shardmgr.OpenCatalog(ctx(t), u.String(), shardmgr.WithRefreshInterval(0))
	require.Error(t, err)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, pgerrcode.InsufficientPrivilege, pe.Code)
	msg := err.Error()
	require.NotContains(t, msg, "\n", "one line")
	reason := strings.Index(msg, "permission denied for database")
	require.GreaterOrEqual(t, reason, 0, msg)
	if tls := strings.Index(msg, "refused TLS"); tls >= 0 {
		require.Less(t, reason, tls, "the server's reason comes first: %s", msg)
	}
	require.False(t, errors.Is(err, shardmgr.ErrNotInitialized))
}

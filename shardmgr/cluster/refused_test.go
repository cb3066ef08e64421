package cluster_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// TestCatalogRefusedLeadsWithTheServersReason: a role (no superuser, no
// grant) whose CONNECT on the catalog's and a host's database PUBLIC no
// longer holds opens the handle, reads the map, checks the catalog and a
// host, and takes single connections: each error leads, on one line, with
// the server's reason (permission denied for database), not with pgconn's
// "tls error: server refused TLS connection" from sslmode=prefer's first
// attempt (failed before: the first line was "failed to connect to
// `user=... database=...`:" and the reason came on the third).
func TestCatalogRefusedLeadsWithTheServersReason(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, true)
	role := clustertest.Role(t, cfg, "refused")
	preferTLS := func(dsn string) string { // the DSN as the role, sslmode=prefer (pgx's default)
		u, err := url.Parse(clustertest.AsRole(t, dsn, role))
		require.NoError(t, err)
		u.RawQuery = ""
		return u.String()
	}
	as := *cfg
	as.Hosts = append([]shardmgr.Host(nil), cfg.Hosts...)
	as.Catalog = preferTLS(cfg.Catalog)
	as.Hosts[0].DSN = preferTLS(cfg.Hosts[0].DSN)
	for _, dsn := range []string{cfg.Catalog, cfg.Hosts[0].DSN} {
		admin := clustertest.Pool(t, dsn)
		var db string
		require.NoError(t, admin.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
		_, err := admin.Exec(ctx, `REVOKE CONNECT ON DATABASE `+pgx.Identifier{db}.Sanitize()+` FROM PUBLIC`)
		require.NoError(t, err)
	}

	c, err := cluster.Open(ctx, &as)
	require.NoError(t, err, "opening connects to nothing")
	defer c.Close()
	leads := func(what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe, what)
		require.Equal(t, pgerrcode.InsufficientPrivilege, pe.Code, what)
		msg := err.Error()
		require.NotContains(t, msg, "\n", "%s: one line", what)
		first := strings.SplitN(msg, ";", 2)[0]
		require.Contains(t, first, "permission denied for database", "%s: the server's reason first: %s", what, msg)
		require.NotContains(t, first, "tls error", "%s: %s", what, msg)
	}
	_, err = c.Map(ctx, shardmgr.UseRead)
	leads("Map", err)
	_, err = c.Catalog(ctx, shardmgr.UseRoute)
	leads("Catalog", err)
	p, err := c.CatalogPool(ctx)
	require.NoError(t, err, "a pool connects lazily")
	leads("CheckCatalog", shardmgr.CheckCatalog(ctx, p, shardmgr.UseRead))
	conn, err := c.CatalogConn(ctx, cluster.Session{})
	if conn != nil {
		conn.Close(ctx)
	}
	leads("CatalogConn", err)
	for _, use := range []shardmgr.SchemaUse{shardmgr.UseRead, shardmgr.UseWrite} {
		_, err = c.Host(ctx, cfg.Hosts[0].Name, use)
		leads("Host", err)
	}
	hp, err := c.HostPool(ctx, cfg.Hosts[0].Name, cluster.Session{})
	require.NoError(t, err)
	_, err = shardmgr.ReadHostVersion(ctx, hp, cfg.Hosts[0].Name)
	leads("ReadHostVersion", err)
	conn, err = c.HostConn(ctx, cfg.Hosts[0].Name, cluster.Session{})
	if conn != nil {
		conn.Close(ctx)
	}
	leads("HostConn", err)
}

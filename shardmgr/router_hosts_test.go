package shardmgr_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// currentDatabase is the database shard's transactions reach through r.
func currentDatabase(t *testing.T, r *shardmgr.Router, shard int) string {
	t.Helper()
	var db string
	require.NoError(t, r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error {
		return tx.QueryRow(ctx, `SELECT current_database()`).Scan(&db)
	}))
	return db
}

func dbName(t *testing.T, dsn string) string {
	pc, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	return pc.Database
}

// requireClosed waits (a bound on a hang, not a speed) until p refuses
// new work: the router closes a retired pool once its work in flight is
// done.
func requireClosed(t *testing.T, r *shardmgr.Router, what string, acquire func(context.Context) error) {
	t.Helper()
	require.Eventually(t, func() bool {
		err := acquire(ctx(t))
		return err != nil && strings.Contains(err.Error(), "closed pool")
	}, 2*time.Minute, 50*time.Millisecond, what)
}

// TestRouterRepointsHostWhoseDSNChanged: after init records a new DSN for
// a host (its database moved: a failover, a restore elsewhere), a router
// that refreshes sends the host's new transactions to the new database and
// closes the pool on the old one.
func TestRouterRepointsHostWhoseDSNChanged(t *testing.T) {
	cfg := initCluster(t, 6)
	r := openRouter(t, cfg)
	shard := clusterMap(t, cfg).ShardsOn("pg2")[0]
	h, _ := cfg.Host("pg2")
	require.Equal(t, dbName(t, h.DSN), currentDatabase(t, r, shard))
	old := shardmgr.RouterPool(r, "pg2")
	require.NotNil(t, old)

	// The operator proposes the new place in the cluster file; init, the
	// one step that applies hosts, records it in the catalog.
	servers := pgtest.Servers(t, 3)
	newDB := fmt.Sprintf("sm%d_app2b", clustertest.DBCounter.Add(1))
	clustertest.DropLater(t, servers[1], newDB)
	cfg.Hosts[1].DSN = servers[1].DSN(newDB)
	res, err := install.Init(ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	require.Contains(t, res.CatalogChanges, "host pg2: new DSN")

	changed, err := r.Reload(ctx(t))
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, newDB, currentDatabase(t, r, shard), "new transactions go to the host's new database")
	require.NotSame(t, old, shardmgr.RouterPool(r, "pg2"))
	requireClosed(t, r, "the pool on the old database is closed", func(ctx context.Context) error {
		c, err := old.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		return err
	})
	// The other hosts keep their pools.
	require.Equal(t, dbName(t, cfg.Hosts[0].DSN), currentDatabase(t, r, clusterMap(t, cfg).ShardsOn("pg1")[0]))
}

// TestRouterClosesRemovedHostPool: a host that leaves the catalog loses
// its pool in every router that refreshes.
func TestRouterClosesRemovedHostPool(t *testing.T) {
	cfg := initCluster(t, 6)
	servers := pgtest.Servers(t, 3)
	extra := fmt.Sprintf("sm%d_app4", clustertest.DBCounter.Add(1))
	clustertest.DropLater(t, servers[0], extra)
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: servers[0].DSN(extra)})
	_, err := install.Init(ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)

	r := openRouter(t, cfg)
	p4 := shardmgr.RouterPool(r, "pg4")
	require.NotNil(t, p4, "the router opened a pool for the empty host")

	cfg.Hosts = cfg.Hosts[:3]
	res, err := install.Init(ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	require.Contains(t, res.CatalogChanges, "remove host pg4")

	changed, err := r.Reload(ctx(t))
	require.NoError(t, err)
	require.True(t, changed)
	require.Nil(t, shardmgr.RouterPool(r, "pg4"))
	requireClosed(t, r, "the removed host's pool is closed", func(ctx context.Context) error {
		c, err := p4.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		return err
	})
}

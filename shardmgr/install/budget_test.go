package install_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/verify"
)

// Init, migrate and verify work within a budget smaller than the hosts
// on one server: no step needs a connection to every host of a server at
// once, nor holds one while it waits for another.
func TestInitWithBudgetBelowHostsPerServer(t *testing.T) {
	t.Parallel()
	s := pgtest.Servers(t, 1)[0]
	n := clustertest.DBCounter.Add(1)
	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("c%d", n), Shards: 24, Path: "test.yaml"}
	cfg.Catalog = s.DSN(fmt.Sprintf("sm%d_catalog", n))
	clustertest.DropLater(t, s, fmt.Sprintf("sm%d_catalog", n))
	for i := range 5 {
		db := fmt.Sprintf("sm%d_app%d", n, i+1)
		cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: fmt.Sprintf("pg%d", i+1), DSN: s.DSN(db)})
		clustertest.DropLater(t, s, db)
	}
	require.NoError(t, cfg.ValidateCluster())
	// Bounds a hang: a step needing five connections at once would wait
	// for its budget of two for ten minutes.
	ctx, cancel := context.WithTimeout(clustertest.Ctx(t), 3*time.Minute)
	defer cancel()
	c, err := cluster.Open(ctx, cfg, cluster.WithConnsPerServer(2))
	require.NoError(t, err)
	defer c.Close()
	// A budget of one cannot hold init's lock session and work beside
	// it: refused at once, not after a wait.
	one, err := cluster.Open(ctx, cfg, cluster.WithConnsPerServer(1))
	require.NoError(t, err)
	defer one.Close()
	_, err = install.Init(ctx, one, install.InitOptions{})
	require.ErrorIs(t, err, cluster.ErrBudgetTooSmall)
	require.ErrorContains(t, err, "init needs at least 2 connections per server")

	res, err := install.Init(ctx, c, install.InitOptions{})
	require.NoError(t, err)
	require.Equal(t, 24, res.Installed)
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, c, set, migrate.Options{})
	require.NoError(t, err)
	rep, err := verify.Verify(ctx, c, verify.Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep)
}

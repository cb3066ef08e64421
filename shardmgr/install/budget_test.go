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
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
)

// Init works within a budget smaller than the hosts on one server: no
// step of it needs a connection to every host of a server at once.
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
	res, err := install.Init(ctx, c, install.InitOptions{})
	require.NoError(t, err)
	require.Equal(t, 24, res.Installed)
}

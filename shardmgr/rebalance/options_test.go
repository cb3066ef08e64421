package rebalance

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// Options no plan can be made with are refused before anything
// connects: on a cluster whose servers do not answer, the error is the
// option's, at once, not a connection's.
func TestPlanOptionsRefusedBeforeConnecting(t *testing.T) {
	ctx := clustertest.Ctx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close()) // nothing listens there now
	dsn := func(db string) string {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db)
	}
	cfg := &shardmgr.Config{Cluster: "c", Shards: 4, Path: "test.yaml", Catalog: dsn("cat"),
		Hosts: []shardmgr.Host{{Name: "pg1", DSN: dsn("a")}, {Name: "pg2", DSN: dsn("b")}}}
	c, err := cluster.Open(ctx, cfg, cluster.WithConnectRetry(1, time.Second))
	require.NoError(t, err)
	defer c.Close()

	_, err = PlanRebalance(ctx, c, PlanOptions{By: "weight"})
	require.EqualError(t, err, `plan by "weight": want count or size`)
	_, err = PlanRebalance(ctx, c, PlanOptions{Mode: "fast"})
	require.EqualError(t, err, `plan mode "fast": want online, offline or auto`)
	_, err = Apply(ctx, c, ApplyOptions{Plan: PlanOptions{By: "weight"}})
	require.EqualError(t, err, `plan by "weight": want count or size`)
	// A good one gets as far as the catalog.
	_, err = PlanRebalance(ctx, c, PlanOptions{})
	require.ErrorContains(t, err, "refused")
}

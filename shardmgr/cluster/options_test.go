package cluster_test

import (
	"bytes"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// deadDSN is a DSN on a port nothing listens on: an option error must come
// before any connection is tried.
func deadDSN(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return "postgres://nobody@127.0.0.1:" + strconv.Itoa(port) + "/none?connect_timeout=5"
}

// The router's options and the handle's follow one convention (shardmgr's
// doc.go): a value an option cannot use makes the constructor fail, before
// it connects, with an error naming the option; WithLogger(nil) is such a
// value for both. Failed before: shardmgr.WithLogger(nil) meant
// slog.Default() and a router option could not fail at all.
func TestRouterAndHandleRefuseBadOptionsAlike(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, false)
	dead := deadDSN(t)
	router := map[string]shardmgr.RouterOption{
		"WithLogger(nil)":     shardmgr.WithLogger(nil),
		"WithPoolConfig(nil)": shardmgr.WithPoolConfig(nil),
		"WithLookupEnv(nil)":  shardmgr.WithLookupEnv(nil),
	}
	for name, opt := range router {
		r, err := shardmgr.OpenCatalog(ctx, dead, opt)
		require.Nil(t, r)
		require.ErrorContains(t, err, "shardmgr: "+name+": want ", "the error names the option, and nothing was dialled")
	}
	handle := map[string]cluster.Option{
		"WithLogger(nil)":           cluster.WithLogger(nil),
		"WithConnsPerServer(0)":     cluster.WithConnsPerServer(0),
		"WithConnectRetry(0, 1s)":   cluster.WithConnectRetry(0, time.Second),
		`WithApplicationName("")`:   cluster.WithApplicationName(""),
		"WithConnsPerServer(10001)": cluster.WithConnsPerServer(cluster.MaxConnsPerServer + 1),
		"WithConnectRetry(2, 0s)":   cluster.WithConnectRetry(2, 0),
	}
	for name, opt := range handle {
		c, err := cluster.Open(ctx, cfg, opt)
		require.Nil(t, c)
		require.ErrorContains(t, err, "cluster: "+name+": want ")
	}
	// A good option passes for both (the router then fails to dial).
	_, err := shardmgr.OpenCatalog(ctx, dead, shardmgr.WithLogger(slog.New(slog.DiscardHandler)), shardmgr.WithPoolConfig(func(string, *pgxpool.Config) {}))
	require.ErrorContains(t, err, "catalog")
	c, err := cluster.Open(ctx, cfg, cluster.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	c.Close()
}

// Without WithLogger the handle logs where the router does: to
// slog.Default() (the router's side: shardmgr's
// TestRouterLogsToTheDefaultLoggerWithoutWithLogger). Failed before: the
// handle discarded its lines.
func TestHandleLogsToTheDefaultLoggerWithoutWithLogger(t *testing.T) {
	var out bytes.Buffer
	was := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, nil)))
	t.Cleanup(func() { slog.SetDefault(was) })
	c, err := cluster.Open(clustertest.Ctx(t), clustertest.Cluster(t, 4, false))
	require.NoError(t, err)
	defer c.Close()
	c.Logger().Info("to the default")
	require.Contains(t, out.String(), "to the default")
}

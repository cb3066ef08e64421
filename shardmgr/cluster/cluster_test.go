package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/logbuf"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestOpenChecksOnce: the cluster file and the options are checked when
// the handle is built; nothing connects yet (init opens a handle on
// databases it has still to create).
func TestOpenChecksOnce(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, false) // databases not created
	c, err := cluster.Open(ctx, cfg)
	require.NoError(t, err)
	defer c.Close()
	require.Same(t, cfg, c.Config())

	bad := *cfg
	bad.Shards = 0
	_, err = cluster.Open(ctx, &bad)
	require.ErrorIs(t, err, shardmgr.ErrConfig)
	for _, opt := range []cluster.Option{cluster.WithConnsPerServer(0), cluster.WithConnectRetry(0, time.Second), cluster.WithConnectRetry(2, 0), cluster.WithLogger(nil)} {
		_, err := cluster.Open(ctx, cfg, opt)
		require.Error(t, err)
	}

	// One pool per host and kind of session, opened once.
	p1, err := c.HostPool(ctx, "pg1", cluster.Session{})
	require.NoError(t, err)
	p2, err := c.HostPool(ctx, "pg1", cluster.Session{})
	require.NoError(t, err)
	require.Same(t, p1, p2)
	p3, err := c.HostPool(ctx, "pg1", cluster.Session{Application: "other"})
	require.NoError(t, err)
	require.NotSame(t, p1, p3)
	_, err = c.HostPool(ctx, "pg9", cluster.Session{})
	require.ErrorIs(t, err, shardmgr.ErrUnknownHost)

	c.Close()
	_, err = c.HostPool(ctx, "pg1", cluster.Session{})
	require.ErrorIs(t, err, cluster.ErrClosed)
}

// backends counts the sessions named app on the server behind admin.
func backends(t *testing.T, admin *pgxpool.Pool, app string) int {
	var n int
	require.NoError(t, admin.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
	return n
}

// TestBudgetBoundsConnectionsPerServer: the handle holds at most its
// budget of connections on one server, across databases and pools; a
// connection wanted beyond it waits (bounded) until one is given back.
func TestBudgetBoundsConnectionsPerServer(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, true)
	s := pgtest.Servers(t, 1)[0] // the catalog's and pg1's server
	app := fmt.Sprintf("budget-%d", clustertest.DBCounter.Add(1))
	c, err := cluster.Open(ctx, cfg, cluster.WithConnsPerServer(3))
	require.NoError(t, err)
	defer c.Close()
	sess := cluster.Session{Application: app}
	cat, err := c.CatalogPoolAs(ctx, sess)
	require.NoError(t, err)
	host, err := c.HostPool(ctx, "pg1", sess)
	require.NoError(t, err)

	var held []*pgxpool.Conn
	defer func() {
		for _, h := range held {
			h.Release()
		}
	}()
	for _, p := range []*pgxpool.Pool{cat, host, host} {
		conn, err := p.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, conn)
	}
	admin := clustertest.Pool(t, s.DSN("postgres"))
	require.Equal(t, 3, backends(t, admin, app))

	// A fourth, on either database of the server, waits for a token; its
	// wait is bounded (here by a short context).
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = cat.Acquire(short)
	cancel()
	require.Error(t, err)
	require.Equal(t, 3, backends(t, admin, app), "no fourth backend started")

	// A connection given back idle does not starve the other pool: a
	// dial short of a token closes an idle connection of the server.
	held[0].Release()
	held = held[1:]
	conn, err := host.Acquire(ctx)
	require.NoError(t, err)
	held = append(held, conn)
	require.LessOrEqual(t, backends(t, admin, app), 3)
}

// TestSlowConnectRetried: a server that is not accepting yet (a host
// restarting under load) is connected to once it is, within the retries.
func TestSlowConnectRetried(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, true)
	s := pgtest.Servers(t, 1)[0]

	// A port nothing listens on yet: connects are refused until a proxy
	// to the real server starts there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	started := make(chan *clustertest.Proxy, 1)
	go func() {
		defer close(started)
		time.Sleep(700 * time.Millisecond)
		p, err := clustertest.StartProxy(fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", s.Port))
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		started <- p
	}()
	var proxy *clustertest.Proxy
	stopProxy := func() {
		if proxy == nil {
			proxy = <-started
		}
		if proxy != nil {
			proxy.Close()
		}
	}
	defer stopProxy()
	cfg.Hosts[0].DSN = strings.Replace(cfg.Hosts[0].DSN, fmt.Sprintf(":%d/", s.Port), fmt.Sprintf(":%d/", port), 1)

	var logged logbuf.Buffer
	c, err := cluster.Open(ctx, cfg, cluster.WithConnectRetry(8, 200*time.Millisecond), cluster.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	defer c.Close()
	p, err := c.HostPool(ctx, "pg1", cluster.Session{})
	require.NoError(t, err)
	require.NoError(t, p.Ping(ctx), "connected once the server accepted")
	require.Contains(t, logged.String(), "connect failed; retrying")

	// Without retries the refusal is the error.
	once, err := cluster.Open(ctx, cfg, cluster.WithConnectRetry(1, time.Second))
	require.NoError(t, err)
	defer once.Close()
	stopProxy()
	p, err = once.HostPool(ctx, "pg1", cluster.Session{})
	require.NoError(t, err)
	require.ErrorContains(t, p.Ping(ctx), "refused")
}

// TestBudgetWaitOutlastsConnectTimeout: a connection that queues for a
// place in its server's budget longer than the connect timeout still
// connects: the connect timeout bounds the connect, not the queue (work
// on a hundred hosts of one server queues here).
func TestBudgetWaitOutlastsConnectTimeout(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, true)
	cfg.Hosts[0].DSN += "&connect_timeout=1"
	c, err := cluster.Open(ctx, cfg, cluster.WithConnsPerServer(1))
	require.NoError(t, err)
	defer c.Close()
	p, err := c.HostPool(ctx, "pg1", cluster.Session{})
	require.NoError(t, err)
	first, err := p.Acquire(ctx)
	require.NoError(t, err)
	go func() {
		time.Sleep(3 * time.Second) // three connect timeouts
		first.Release()
	}()
	start := time.Now()
	second, err := p.Acquire(ctx)
	require.NoError(t, err, "queued past the connect timeout, then connected")
	defer second.Release()
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second)
}

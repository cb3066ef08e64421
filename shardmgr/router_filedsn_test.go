package shardmgr_test

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/logbuf"
	"github.com/shardid/shardid/shardmgr"
)

// The application's cluster file points pg2's dsn: at a dead port (the
// catalog still names pg2's real address) and sets no app_dsn: the router
// routes through the catalog's DSN, as it must, and now says so, once
// for the host, naming app_dsn:. Failed before: rows went to pg2's shards
// with no log line (issue 28).
func TestRouterLogsAFileDSNItDoesNotUse(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	u, err := url.Parse(cfg.Hosts[1].DSN)
	require.NoError(t, err)
	catalogPort := u.Port()
	u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(dead))
	cfg.Hosts[1].DSN = u.String()

	var logs logbuf.Buffer
	r := openRouter(t, cfg, shardmgr.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	m := clusterMap(t, cfg)
	for range 2 {
		for id := range r.Shards() {
			require.NoError(t, r.Tx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error { return nil }))
		}
		_, err := r.Reload(ctx(t))
		require.NoError(t, err)
	}
	require.NotEmpty(t, m.ShardsOn("pg2"))
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "is not the catalog's"), out)
	line := out[strings.Index(out, "is not the catalog's"):]
	line = line[:strings.Index(line, "\n")]
	require.Contains(t, line, "host=pg2")
	require.Contains(t, line, "app_dsn:")
	require.Contains(t, line, ":"+catalogPort+"/", "names the DSN it uses")
	require.NotContains(t, out, "password")
}

// Without WithLogger the router logs where the cluster handle does: to
// slog.Default() (shardmgr/cluster's
// TestHandleLogsToTheDefaultLoggerWithoutWithLogger holds the handle's
// side). Here, the line about a cluster-file DSN it does not use.
func TestRouterLogsToTheDefaultLoggerWithoutWithLogger(t *testing.T) {
	cfg := initCluster(t, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	u, err := url.Parse(cfg.Hosts[1].DSN)
	require.NoError(t, err)
	u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(dead))
	cfg.Hosts[1].DSN = u.String()

	var logs logbuf.Buffer
	was := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(was) })
	r := openRouter(t, cfg)
	for id := range r.Shards() {
		require.NoError(t, r.Tx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error { return nil }))
	}
	require.Contains(t, logs.String(), "is not the catalog's")
}

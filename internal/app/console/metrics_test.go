package console

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// The console samples each host itself (an interval and a clock the
// test sets): connections, transactions per second from pg_stat_database
// and the replication lag; the map shows the latest values and a
// sparkline of the window. After activity on a host its values move. The
// sample reads only what pg_monitor may: as a role with pg_monitor alone
// (not a superuser, no right on the host's tables) it reads them too.
// Failed before: the console sampled nothing.
func TestConsoleHostMetrics(t *testing.T) {
	tc := newTestCluster(t, 1, 2, 4, 1)
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { // a second a sample, however slow the machine
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	base, con := tc.serve(t, Options{SampleEvery: 200 * time.Millisecond, Now: now})
	tab := browse(t)
	run(t, tab, "map", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`#host-pg1 .metrics`)))
	value := func(css string) string {
		return eval(t, tab, css, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(css)+`) || {}).textContent || ""`))
	}
	require.Eventually(t, func() bool {
		return value(`#host-pg1 .m-tps`) != "-" && value(`#host-pg1 .m-conns`) != ""
	}, browserWait, 200*time.Millisecond, "pg1's rate never shown")
	require.Equal(t, "none", value(`#host-pg1 .m-lag`), "no standby: no lag")
	require.NotEmpty(t, eval(t, tab, "sparkline", chromedp.Evaluate[string](`document.querySelector("#host-pg1 .spark polyline").getAttribute("points")`)))

	// Activity on pg1: 30 open sessions and a stream of transactions.
	ctx := context.Background()
	dsn := tc.hostDSN(t, "pg1")
	var conns []*pgx.Conn
	for range 30 {
		c, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close(context.Background())
		}
	}()
	busy, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		defer busy.Close(context.Background())
		for {
			select {
			case <-stop:
				return
			default:
			}
			busy.Exec(ctx, "SELECT 1") // each its own transaction
		}
	}()
	defer func() { close(stop); <-stopped }()
	require.Eventually(t, func() bool {
		n, _ := strconv.Atoi(value(`#host-pg1 .m-conns`))
		tps, _ := strconv.ParseFloat(value(`#host-pg1 .m-tps`), 64)
		return n >= 30 && tps > 1
	}, browserWait, 200*time.Millisecond, "pg1's connections and rate do not follow: %s, %s", value(`#host-pg1 .m-conns`), value(`#host-pg1 .m-tps`))

	// The window is a ring: 15 minutes of samples at most.
	require.Equal(t, int(15*time.Minute/(200*time.Millisecond)), con.metrics.keep)
	ring := newMetrics(time.Minute)
	t0 := time.Now()
	for i := range 20 {
		ring.add("h", sample{At: t0.Add(time.Duration(i) * time.Minute), Xacts: int64(60 * i)})
	}
	kept := ring.of("h")
	require.Len(t, kept, 15)
	require.Equal(t, t0.Add(5*time.Minute), kept[0].At, "the oldest dropped")
	require.InDelta(t, 1.0, *kept[14].TPS, 1e-9, "60 transactions a minute")

	// As a role with pg_monitor only.
	monitor := loginRole(t, 1, "monitor", true)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(monitor)
	pool := pgtest.Pool(t, u.String())
	var super bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super))
	require.False(t, super)
	s := sampleHost(ctx, pool, time.Now())
	require.Empty(t, s.Err)
	require.GreaterOrEqual(t, s.Conns, int64(30), fmt.Sprint(s))
	require.Greater(t, s.Xacts, int64(0))
	require.Nil(t, s.LagMS)
}

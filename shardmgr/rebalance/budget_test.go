package rebalance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// peakSampler counts, every 20 ms, the backends named app on each server
// (from a superuser session of its own, outside the handle) and keeps
// the highest count seen per server.
type peakSampler struct {
	mu   sync.Mutex
	peak map[string]int
	n    int // samples taken
}

func samplePeaks(t *testing.T, servers map[string]string, app string, stop <-chan struct{}) (*peakSampler, *sync.WaitGroup) {
	s := &peakSampler{peak: map[string]int{}}
	var wg sync.WaitGroup
	for name, dsn := range servers {
		admin := clustertest.Pool(t, dsn)
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var n int
				err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
				cancel()
				if err != nil {
					continue // a slow sample is skipped, not a failure
				}
				s.mu.Lock()
				s.peak[name] = max(s.peak[name], n)
				s.n++
				s.mu.Unlock()
			}
		})
	}
	return s, &wg
}

// TestBudgetCoversEveryConnection: with a budget of 6 connections per
// server, init of six hosts on two servers, the shards' migrations and an
// online move under writers (its COPY pairs, replication connection and
// move lock included) never hold more than 6 backends on either server:
// every connection an operator command makes goes through the handle.
// (The subscription's own connection to the source is the target
// server's worker's, not the handle's, and carries the subscription's
// name.)
func TestBudgetCoversEveryConnection(t *testing.T) {
	t.Parallel()
	const budget = 6
	ctx := clustertest.Ctx(t)
	servers := pgtest.Servers(t, 2)
	n := clustertest.DBCounter.Add(1)
	app := fmt.Sprintf("budget%d", n)
	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("c%d", n), Shards: 48, Path: "test.yaml"}
	cfg.Catalog = servers[0].DSN(fmt.Sprintf("sm%d_catalog", n))
	clustertest.DropLater(t, servers[0], fmt.Sprintf("sm%d_catalog", n))
	for i := range 6 {
		s := servers[i%2]
		db := fmt.Sprintf("sm%d_app%d", n, i+1)
		cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: fmt.Sprintf("pg%d", i+1), DSN: s.DSN(db)})
		clustertest.DropLater(t, s, db)
	}
	require.NoError(t, cfg.ValidateCluster())
	c, err := cluster.Open(ctx, cfg, cluster.WithConnsPerServer(budget), cluster.WithApplicationName(app))
	require.NoError(t, err)
	defer c.Close()

	stop := make(chan struct{})
	peaks, sampling := samplePeaks(t, map[string]string{"server0": servers[0].DSN("postgres"), "server1": servers[1].DSN("postgres")}, app, stop)
	stopped := false
	stopSampling := func() {
		if !stopped {
			close(stop)
			sampling.Wait()
			stopped = true
		}
	}
	defer stopSampling()

	_, err = install.Init(ctx, c, install.InitOptions{})
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, c, sampleSet(t), migrate.Options{})
	require.NoError(t, err)

	// An online move within server0 (pg1 to pg3): its copy needs a
	// source and a target connection on one server at once.
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, 0, 2000)
	wstop := make(chan struct{})
	w, wg := runWriters(t, r, []int{0, 0, 1, 9}, 4, wstop)
	res, err := MoveShard(ctx, c, 0, "pg3", MoveOptions{Migrations: sampleSet(t), CutoverTimeout: time.Minute})
	close(wstop)
	wg.Wait()
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Empty(t, w.failures)
	stopSampling()

	t.Logf("peak backends named %s per server over %d samples: %v (budget %d)", app, peaks.n, peaks.peak, budget)
	require.Positive(t, peaks.peak["server0"], "the sampler saw the handle's sessions")
	for s, p := range peaks.peak {
		require.LessOrEqual(t, p, budget, "server %s", s)
	}
}

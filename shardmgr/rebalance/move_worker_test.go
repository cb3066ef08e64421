package rebalance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// workerCluster is moveCluster with pg4 on a server of the test's own
// with settings.
func workerCluster(t *testing.T, shards int, settings map[string]string) (*shardmgr.Config, *localpg.Server) {
	t.Helper()
	cfg := installtest.Cluster(t, shards)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	s := pgtest.Own(t, localpg.Options{Settings: settings})
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: s.DSN("app")})
	require.NoError(t, cfg.ValidateCluster())
	applyHosts(t, cfg)
	return cfg, s
}

// subscriptionsEnabled counts the subscriptions of the target's database
// that are enabled (each holds a worker slot).
func subscriptionsEnabled(t *testing.T, cfg *shardmgr.Config, host string) int {
	t.Helper()
	var n int
	require.NoError(t, clustertest.HostPool(t, cfg, host).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_subscription
		WHERE subenabled AND subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n))
	return n
}

// A target whose logical replication worker slots are all taken fails
// the move at once, naming the setting, with its subscription disabled;
// once the setting is raised the same move resumes and finishes clean.
func TestMoveFailsAtOnceWithoutWorkerSlots(t *testing.T) {
	t.Parallel()
	cfg, s := workerCluster(t, 3, map[string]string{"max_logical_replication_workers": "0", "wal_retrieve_retry_interval": "100ms"})
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 300)
	want := likeIDs(t, cfg, 1)

	// The preflight refuses such a target before anything changes
	// (TestPreflightOneWorkerOnTarget); here the slots are gone after it
	// looked, and the mover's own check must not hang either: with a
	// worker start timeout of ten minutes, a move that waited for it would
	// outlast the test's context (half of it), while one that fails at
	// once finishes long before, however loaded the machine (a bound of
	// seconds did not hold at a load average of 25 on 2 cores).
	const workerStart = 10 * time.Minute
	c, cancel := context.WithTimeout(clustertest.Ctx(t), workerStart/2)
	defer cancel()
	_, err := MoveShard(c, clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t), WorkerStartTimeout: workerStart})
	require.ErrorIs(t, err, ErrPreflight)
	opts := MoveOptions{Migrations: sampleSet(t), WorkerStartTimeout: workerStart}
	opts.skipPreflight = true
	t0 := time.Now()
	res, err := MoveShard(c, clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, ErrNoWorker)
	require.ErrorContains(t, err, "max_logical_replication_workers = 0")
	require.Less(t, time.Since(t0), workerStart/2, "failed at once, not after a timeout")
	require.Equal(t, PhaseCopy, res.Phase)
	require.Zero(t, subscriptionsEnabled(t, cfg, "pg4"))
	require.Equal(t, "pg2", clustertest.ClusterMap(t, cfg).Shards[1].Host)
	require.Equal(t, want, likeIDs(t, cfg, 1), "the failed move left the source's rows as they were")
	routeLikes(t, r, 1, 10) // the source serves
	want = likeIDs(t, cfg, 1)

	// The fix the message names (ALTER SYSTEM and a restart, which
	// localpg's command-line settings stand for).
	require.NoError(t, s.Halt())
	s.Set("max_logical_replication_workers", "4")
	require.NoError(t, s.Restart(clustertest.Ctx(t)))
	clustertest.Reopen(t, cfg) // a new command after the restart

	res, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, want, likeIDs(t, cfg, 1))
	open, err := Moves(clustertest.Ctx(t), clustertest.Handle(t, cfg), false)
	require.NoError(t, err)
	require.Empty(t, open)
	rec := moveRecord(t, cfg, res.ID)
	require.Empty(t, rec.Error)
	require.Zero(t, replicationLeftovers(t, cfg, rec.replName))
	requireVerifyOK(t, cfg)
}

// A subscription whose worker does not start within WorkerStartTimeout
// (here: the target's logical replication launcher is stopped, SIGSTOP,
// so that it starts no worker; the earlier way, a launcher throttled by
// wal_retrieve_retry_interval after the first move's worker, does not
// hold on 18, whose launcher throttles each subscription alone) fails
// its move with the cause; the move holds no worker slot and aborts
// clean.
func TestMoveFailsWhenWorkerDoesNotStart(t *testing.T) {
	t.Parallel()
	cfg, s := workerCluster(t, 3, nil)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 2, 100)
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	launcher, err := s.FreezeBackends(clustertest.Ctx(t), "logical replication launcher")
	require.NoError(t, err)
	t.Cleanup(func() { localpg.Thaw(launcher) })

	c, cancel := context.WithTimeout(clustertest.Ctx(t), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := MoveShard(c, clustertest.Handle(t, cfg), 2, "pg4", MoveOptions{Migrations: sampleSet(t), WorkerStartTimeout: 2 * time.Second})
	require.ErrorIs(t, err, ErrNoWorker)
	require.ErrorContains(t, err, "none started within 2s")
	require.Less(t, time.Since(t0), 45*time.Second)
	require.Zero(t, subscriptionsEnabled(t, cfg, "pg4"))

	localpg.Thaw(launcher)
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{2})
	require.NoError(t, err)
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, res.ID).replName))
	routeLikes(t, r, 2, 1)
	requireVerifyOK(t, cfg)
}

// Catch-up is bounded too: a move whose target cannot catch up within
// CatchupTimeout fails with ErrCatchupTimeout and stays resumable.
func TestMoveCatchupTimeout(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 0, 100)
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t), CatchupTimeout: time.Nanosecond, CatchupDelay: time.Nanosecond})
	require.ErrorIs(t, err, ErrCatchupTimeout)
	require.Zero(t, subscriptionsEnabled(t, cfg, "pg4"))
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Rows)
	requireVerifyOK(t, cfg)
}

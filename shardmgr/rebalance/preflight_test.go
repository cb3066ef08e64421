package rebalance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// stockCluster is three shards, one per host, where pg1 runs on a server of
// this test's own with settings src, and pg1 is marked drain so that a
// rebalance moves its shard 0 to pg4, added to the cluster file only, on a
// server with settings dst (each server's database "app" exists, empty).
func stockCluster(t *testing.T, src, dst map[string]string) *shardmgr.Config {
	t.Helper()
	cfg := clustertest.Cluster(t, 3, false)
	s1 := pgtest.Own(t, localpg.Options{Settings: src})
	cfg.Hosts[0].DSN = s1.DSN("app")
	_, err := install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 0, 50)
	s4 := pgtest.Own(t, localpg.Options{Settings: dst})
	_, err = s4.CreateDatabase(clustertest.Ctx(t), "app")
	require.NoError(t, err)
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: s4.DSN("app")})
	cfg.Hosts[0].Drain = true
	require.NoError(t, cfg.ValidateCluster())
	return cfg
}

// requireNothingChanged checks that a refused operation left the catalog
// at generation gen, registered no host, journaled no move and made no
// schema on pg4.
func requireNothingChanged(t *testing.T, cfg *shardmgr.Config, gen int64) {
	t.Helper()
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, gen, m.Generation, "catalog generation")
	_, known := m.Host("pg4")
	require.False(t, known, "pg4 registered")
	require.False(t, m.Hosts[0].Drain, "drain mark registered")
	var moves int
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM shardid.moves`).Scan(&moves))
	require.Zero(t, moves, "journal rows")
	var schemas int
	require.NoError(t, clustertest.HostPool(t, cfg, "pg4").QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'shard%' OR nspname = 'shardid'`).Scan(&schemas))
	require.Zero(t, schemas, "schemas on pg4")
}

func failedCheck(t *testing.T, err error, host, setting string) Check {
	t.Helper()
	var pe *PreflightError
	require.ErrorAs(t, err, &pe)
	for _, c := range pe.Failed {
		if c.Host == host && c.Setting == setting {
			return c
		}
	}
	t.Fatalf("no failed check of %s on %s in %v", setting, host, err)
	return Check{}
}

// A source with the default wal_level (replica): plan, apply and shard
// move refuse online moves before anything changes, naming wal_level and
// the ways out; auto mode moves the shard offline and says why.
func TestPreflightWALLevelReplica(t *testing.T) {
	t.Parallel()
	cfg := stockCluster(t, map[string]string{"wal_level": "replica"}, nil)
	gen := clustertest.ClusterMap(t, cfg).Generation

	plan, err := PlanRebalance(clustertest.Ctx(t), clustertest.Handle(t, cfg), PlanOptions{})
	require.ErrorIs(t, err, ErrPreflight)
	require.NotNil(t, plan)
	require.Equal(t, []PlannedMove{{Shard: 0, From: "pg1", To: "pg4", Bytes: plan.Moves[0].Bytes, Mode: MoveOnline}}, plan.Moves)
	require.Contains(t, plan.Preflight, failedCheck(t, err, "pg1", CheckWALLevel))

	_, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Parallel: 4, Move: MoveOptions{Migrations: sampleSet(t)}})
	require.ErrorIs(t, err, ErrPreflight)
	c := failedCheck(t, err, "pg1", CheckWALLevel)
	require.Equal(t, Check{Host: "pg1", Role: RoleSource, Setting: "wal_level", Value: "replica", Need: "logical", Shards: []int{0},
		Fix: &Fix{Offline: true, SQL: "ALTER SYSTEM SET wal_level = logical", Restart: true}}, c)
	require.ErrorContains(t, err, "pg1 (source): wal_level is replica, need logical")
	var pe *PreflightError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Failed, 1, "only wal_level fails: %v", err)
	requireNothingChanged(t, cfg, gen)

	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, ErrPreflight)
	failedCheck(t, err, "pg1", CheckWALLevel)
	requireNothingChanged(t, cfg, gen)

	// Offline needs none of it; the preflight has nothing to check.
	plan, err = PlanRebalance(clustertest.Ctx(t), clustertest.Handle(t, cfg), PlanOptions{Mode: MoveOffline})
	require.NoError(t, err)
	require.Empty(t, plan.Preflight)

	// Auto: offline, because of wal_level, said per move.
	plan, err = PlanRebalance(clustertest.Ctx(t), clustertest.Handle(t, cfg), PlanOptions{Mode: MoveAuto})
	require.NoError(t, err)
	require.Equal(t, MoveOffline, plan.Moves[0].Mode)
	require.Equal(t, "wal_level is replica on pg1", plan.Moves[0].ModeReason)
	applyHosts(t, cfg) // the preflight refused before the hosts mattered
	res, err := Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Move: MoveOptions{Migrations: sampleSet(t), Mode: MoveAuto}})
	require.NoError(t, err)
	require.Len(t, res.Moves, 1)
	mv := res.Moves[0]
	require.Equal(t, MoveOffline, mv.Mode)
	require.Equal(t, "wal_level is replica on pg1", mv.ModeReason)
	require.Equal(t, PhaseCleaned, mv.Phase)
	require.EqualValues(t, 50, mv.Rows)
	require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[0].Host)
	require.Equal(t, MoveOffline, moveRecord(t, cfg, mv.ID).Mode)
}

// A target whose only logical replication worker is taken: no online move
// can run there; apply is refused with the setting and the fix, never
// left to hang, and auto goes offline. (One free worker is enough for any
// --parallel: batches run in waves of the free workers,
// TestApplyParallelOnOneWorkerTarget.)
func TestPreflightOneWorkerOnTarget(t *testing.T) {
	t.Parallel()
	cfg := stockCluster(t, nil, map[string]string{"max_logical_replication_workers": "1"})
	gen := clustertest.ClusterMap(t, cfg).Generation
	// Someone else's subscription holds pg4's one worker.
	src, dst := clustertest.HostPool(t, cfg, "pg2"), clustertest.HostPool(t, cfg, "pg4")
	_, err := src.Exec(clustertest.Ctx(t), `CREATE PUBLICATION other_pub`)
	require.NoError(t, err)
	conninfo, err := libpqConnInfo(cfg.Hosts[1].DSN)
	require.NoError(t, err)
	_, err = dst.Exec(clustertest.Ctx(t), `CREATE SUBSCRIPTION other_sub CONNECTION `+pg.QuoteLiteral(conninfo)+` PUBLICATION other_pub`)
	require.NoError(t, err)
	t.Cleanup(func() {
		dst.Exec(context.Background(), `ALTER SUBSCRIPTION other_sub DISABLE`)
		dst.Exec(context.Background(), `ALTER SUBSCRIPTION other_sub SET (slot_name = NONE)`)
		dst.Exec(context.Background(), `DROP SUBSCRIPTION other_sub`)
	})
	require.Eventually(t, func() bool {
		var n int
		return dst.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_catalog.pg_stat_subscription WHERE pid IS NOT NULL`).Scan(&n) == nil && n == 1
	}, time.Minute, 50*time.Millisecond, "the other subscription's worker starts")

	_, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Parallel: 4, Move: MoveOptions{Migrations: sampleSet(t)}})
	require.ErrorIs(t, err, ErrPreflight)
	c := failedCheck(t, err, "pg4", CheckWorkers)
	require.Equal(t, RoleTarget, c.Role)
	require.Equal(t, "1 (0 free)", c.Value)
	require.Equal(t, "1 free (batches run in waves of the free workers)", c.Need)
	require.Equal(t, &Fix{Offline: true, SQL: "ALTER SYSTEM SET max_logical_replication_workers = 2", Restart: true}, c.Fix)
	requireNothingChanged(t, cfg, gen)

	applyHosts(t, cfg)
	res, err := Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Parallel: 4, Move: MoveOptions{Migrations: sampleSet(t), Mode: MoveAuto}})
	require.NoError(t, err)
	require.Len(t, res.Moves, 1)
	require.Equal(t, MoveOffline, res.Moves[0].Mode)
	require.Equal(t, "no logical replication worker free on pg4", res.Moves[0].ModeReason)
}

// A source serves one batch per target its moves go to, all at once: one
// slot each, whatever --parallel; the fix names the setting to raise.
func TestPreflightSlotsPerBatch(t *testing.T) {
	facts := map[string]*hostFacts{
		"pg1": {walLevel: "logical", maxSlots: 10, usedSlots: 9, maxSenders: 10, super: true, noIdentity: map[string][]string{}},
		"pg4": {maxWorkers: 4, maxProcesses: 8, usedProcesses: 1, super: true, version: 150000},
		"pg5": {maxWorkers: 4, maxProcesses: 8, usedProcesses: 1, super: true, version: 150000},
	}
	var moves []preflightMove
	for s := range 3 {
		moves = append(moves, preflightMove{Shard: s, From: "pg1", To: "pg4", Schema: "x", Mode: MoveOnline})
	}
	// Three moves to one target are one batch: one free slot is enough.
	for _, c := range onlineChecks(facts, moves, 4, nil) {
		require.True(t, c.OK, "%v", c)
	}
	moves = append(moves, preflightMove{Shard: 3, From: "pg1", To: "pg5", Schema: "y", Mode: MoveOnline})
	var slots Check
	for _, c := range onlineChecks(facts, moves, 1, nil) {
		if c.Setting == CheckSlots {
			slots = c
		} else {
			require.True(t, c.OK, "%v", c)
		}
	}
	require.Equal(t, Check{Host: "pg1", Role: RoleSource, Setting: CheckSlots, Value: "10 (1 free)", Need: "2 free (one per batch, a source and target pair: 2)",
		Shards: []int{0, 1, 2, 3}, Fix: &Fix{Offline: true, SQL: "ALTER SYSTEM SET max_replication_slots = 11", Restart: true}}, slots)
}

// Two hosts that are two databases of one server share its slots: two
// moves, one from each, are two batches and need two slots of the one
// server, reported once.
func TestPreflightCountsSlotsPerServer(t *testing.T) {
	f := &hostFacts{walLevel: "logical", maxSlots: 10, usedSlots: 9, maxSenders: 10, super: true, noIdentity: map[string][]string{}}
	facts := map[string]*hostFacts{"pg1": f, "pg2": f, "pg4": {maxWorkers: 10, maxProcesses: 20, super: true, version: 150000}}
	moves := []preflightMove{
		{Shard: 1, From: "pg1", To: "pg4", Schema: "a", Mode: MoveOnline},
		{Shard: 2, From: "pg2", To: "pg4", Schema: "b", Mode: MoveOnline},
	}
	var slots []Check
	for _, c := range onlineChecks(facts, moves, 4, map[string]string{"pg1": "s:5432", "pg2": "s:5432", "pg4": "t:5432"}) {
		if c.Setting == CheckSlots {
			slots = append(slots, c)
		}
	}
	require.Len(t, slots, 1)
	require.Equal(t, "pg1, pg2", slots[0].Host)
	require.Equal(t, []int{1, 2}, slots[0].Shards)
	require.Equal(t, "2 free (one per batch, a source and target pair: 2)", slots[0].Need)
	require.False(t, slots[0].OK)
	// Each its own server: one batch each, two free slots each suffice.
	for _, c := range onlineChecks(facts, moves, 4, nil) {
		require.True(t, c.OK, "%v", c)
	}
}

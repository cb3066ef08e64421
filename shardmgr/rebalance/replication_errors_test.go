package rebalance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// An apply worker that failed once and recovered (its walsender on the
// source was ended, as a source restart would) does not block the move's
// resume: failures count from a baseline taken when this run starts the
// subscription. Failed before: every resume failed at once with
// "logical replication reported 1 errors".
func TestMoveResumesAfterTheApplyWorkerRecovered(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	const shard = 1
	r := openRouter(t, cfg)
	routeLikes(t, r, shard, 30)
	want := likeIDs(t, cfg, shard)
	from := clustertest.ClusterMap(t, cfg).Shards[shard].Host
	opts := MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration), Logger: testLogger(t)}
	opts.stopAfter = PhaseCopy
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	repl := moveRecord(t, cfg, res.ID).replName
	src, dst := clustertest.HostPool(t, cfg, from), clustertest.HostPool(t, cfg, "pg4")
	walsender := func() *int32 {
		var pid *int32
		require.NoError(t, src.QueryRow(clustertest.Ctx(t), `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, repl).Scan(&pid))
		return pid
	}
	require.Eventually(t, func() bool { return walsender() != nil }, 2*time.Minute, 50*time.Millisecond, "the worker never streamed")
	_, err = src.Exec(clustertest.Ctx(t), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1`, repl)
	require.NoError(t, err)
	if serverMajor(t, dst) >= 15 {
		require.Eventually(t, func() bool {
			n, err := applyErrors(clustertest.Ctx(t), dst, repl)
			require.NoError(t, err)
			return n > 0
		}, 2*time.Minute, 50*time.Millisecond, "the worker's failure was not counted")
	} // else 14: no pg_stat_subscription_stats, nothing counts the failure (docs/rebalance.md)
	require.Eventually(t, func() bool { return walsender() != nil }, 2*time.Minute, 50*time.Millisecond, "the worker did not come back")

	opts.stopAfter = ""
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.NoError(t, err)
	require.Equal(t, want, likeIDs(t, cfg, shard))
}

// A column added on the source while the move follows it (here after the
// scans, before the fence) makes the target's apply worker fail ("missing
// replicated column", in the target's log only): the move fails soon with
// ErrReplicationFailed naming the column, the source still serving, rather
// than wait out the catch-up timeout. Failed before: it waited, then said
// only that it timed out.
func TestMoveReportsTheApplyWorkersFailure(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	const shard = 1
	m := clustertest.ClusterMap(t, cfg)
	schema := m.Shards[shard].Schema
	likes := pgx.Identifier{schema, "likes"}.Sanitize()
	opts := MoveOptions{Migrations: sampleSet(t), CatchupTimeout: 3 * time.Minute, Logger: testLogger(t)}
	counted := serverMajor(t, clustertest.HostPool(t, cfg, "pg4")) >= 15
	if !counted {
		// 14 has no pg_stat_subscription_stats: the worker's failure shows
		// as a catch-up that does not end (docs/rebalance.md), so the move
		// fails on its timeout, the source still serving.
		opts.CatchupTimeout = 30 * time.Second
	}
	opts.afterScans = func(ctx context.Context, src, dst *pgxpool.Pool) error {
		_, err := src.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN extra int; INSERT INTO %[1]s (user_id, post_id, extra) VALUES (1, 1, 1)`, likes))
		return err
	}
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	if counted {
		require.ErrorIs(t, err, ErrReplicationFailed)
		require.ErrorContains(t, err, `column "`+schema+`".likes.extra on the source is missing on the target`)
		require.NotErrorIs(t, err, ErrCatchupTimeout)
	} else {
		require.ErrorIs(t, err, ErrCatchupTimeout)
	}
	m2 := clustertest.ClusterMap(t, cfg)
	require.Equal(t, m.Shards[shard].Host, m2.Shards[shard].Host)
	require.Equal(t, m.Shards[shard].State, m2.Shards[shard].State, "the shard is not left fenced")
}

// serverMajor is the PostgreSQL major db runs (14, 15, ...).
func serverMajor(t *testing.T, db *pgxpool.Pool) int {
	t.Helper()
	var major int
	require.NoError(t, db.QueryRow(clustertest.Ctx(t), `SELECT current_setting('server_version_num')::int / 10000`).Scan(&major))
	return major
}

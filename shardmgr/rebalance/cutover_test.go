package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	shsql "github.com/shardid/shardid/sql"
)

// probe writes one row straight to shard's copy on every host, as writers
// with a stale map (or none) would, and keeps the ids acknowledged.
type probe struct {
	mu  sync.Mutex
	ids []int64
}

func (p *probe) write(ctx context.Context, pools []*pgxpool.Pool, schema string) {
	for _, db := range pools {
		var id int64
		err := db.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (7, 7) RETURNING id`, pgx.Identifier{schema, "likes"}.Sanitize())).Scan(&id)
		if err == nil {
			p.mu.Lock()
			p.ids = append(p.ids, id)
			p.mu.Unlock()
		}
	}
}

// requireAllOnHome fails unless every id in want is stored in shard's copy
// on the host the catalog places it on.
func requireAllOnHome(t *testing.T, cfg *shardmgr.Config, shard int, want []int64, what string) {
	t.Helper()
	got := likeIDs(t, cfg, shard)
	var lost []int64
	for _, id := range want {
		if _, ok := slices.BinarySearch(got, id); !ok {
			lost = append(lost, id)
		}
	}
	require.Zero(t, len(lost), "%s: %d ids acknowledged by a host and not on the shard's host %s, among them %v",
		what, len(lost), clustertest.ClusterMap(t, cfg).Shards[shard].Host, lost[:min(len(lost), 5)])
}

// TestCutoverInterruptedKeepsAcknowledgedRows interrupts a move at each
// point of its cut-over (killed between its steps, in the catalog's
// transaction, between the catalog's commit and the target's opening,
// after the opening; the catalog step failing), with writers on every
// host around the map and a write to both copies at the very point; then
// aborts the move (which must refuse once the catalog names the target)
// and runs it again. Every id a host acknowledged is on the shard's host
// at the end.
func TestCutoverInterruptedKeepsAcknowledgedRows(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 8)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	for i, tc := range []struct {
		name string
		set  func(opts *MoveOptions, atPoint func())
		// wantFirst is the first run's error (nil: the catalog's);
		// abort whether the move is aborted next, and abortErr what abort
		// answers (nil: it rolls the move back; else the move is run
		// again to its end).
		wantFirst error
		abort     bool
		abortErr  error
	}{
		{name: "catalog step fails", set: func(o *MoveOptions, at func()) {
			o.flipCatalog = func() error { at(); return errors.New("catalog unreachable") }
		}},
		{name: "killed in the catalog step", set: func(o *MoveOptions, at func()) {
			o.flipCatalog = func() error { at(); return errCrashed }
		}, wantFirst: errCrashed, abort: true},
		{name: "killed between verify and flip", set: func(o *MoveOptions, at func()) {
			o.stopAfter = PhaseVerified
		}, wantFirst: errStopped},
		{name: "killed after the catalog flip", set: func(o *MoveOptions, at func()) {
			o.crashAt = crashFlipCommitted
		}, wantFirst: errCrashed, abort: true, abortErr: ErrMoveFlipped},
		{name: "killed after the target opened", set: func(o *MoveOptions, at func()) {
			o.crashAt = crashTargetOpened
		}, wantFirst: errCrashed, abort: true, abortErr: ErrMoveFlipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shard := i
			routeLikes(t, r, shard, 50)
			before := likeIDs(t, cfg, shard)
			m := clustertest.ClusterMap(t, cfg)
			schema := m.Shards[shard].Schema
			pools := []*pgxpool.Pool{clustertest.HostPool(t, cfg, m.Shards[shard].Host), clustertest.HostPool(t, cfg, "pg4")}
			h := hammerShard(t, cfg, schema, []string{"likes"}, 1)
			var p probe
			at := func() { p.write(clustertest.Ctx(t), pools, schema) }
			opts := MoveOptions{Migrations: sampleSet(t)}
			tc.set(&opts, at)
			_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
			if tc.wantFirst == nil {
				require.ErrorContains(t, err, "catalog unreachable")
			} else {
				require.ErrorIs(t, err, tc.wantFirst)
			}
			at() // and the writers carry on in the state the move was left in
			time.Sleep(300 * time.Millisecond)
			at()

			if tc.abort {
				_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{shard})
				if tc.abortErr == nil {
					require.NoError(t, err)
					require.Equal(t, m.Shards[shard].Host, clustertest.ClusterMap(t, cfg).Shards[shard].Host)
				} else {
					require.ErrorIs(t, err, tc.abortErr)
				}
			}
			if !tc.abort || tc.abortErr != nil {
				res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t)})
				require.NoError(t, err)
				require.Equal(t, PhaseCleaned, res.Phase)
				require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
			}
			at()
			routeLikes(t, r, shard, 5)
			h.stop()
			want := append(slices.Clone(before), p.ids...)
			for _, ids := range h.ids {
				want = append(want, ids...)
			}
			t.Logf("%d writes acknowledged, %d refused", len(want)-len(before), h.errs)
			requireAllOnHome(t, cfg, shard, want, tc.name)
		})
	}
	requireVerifyOK(t, cfg)
}

// TestCleanupFailureKeepsNewHomeServing makes a move's cleanup fail after
// its flip: a long read transaction on the new home (a report, a
// pg_dump) holds a lock that dropping the move's triggers waits for. The
// shard's new home, which the catalog names, keeps serving writes and
// ids; the move stays flipped with its error recorded, and Cleanup
// finishes it once the reader is gone. Moving the shard on works.
func TestCleanupFailureKeepsNewHomeServing(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	const shard = 1
	routeLikes(t, r, shard, 50)
	from := clustertest.ClusterMap(t, cfg).Shards[shard].Host
	dst := clustertest.HostPool(t, cfg, "pg4")
	var reader pgx.Tx
	opts := MoveOptions{Migrations: sampleSet(t), LockTimeout: 50 * time.Millisecond}
	opts.flipCatalog = func() error {
		if reader != nil {
			return nil
		}
		var err error
		if reader, err = dst.Begin(clustertest.Ctx(t)); err != nil {
			return err
		}
		t.Cleanup(func() { reader.Rollback(context.Background()) })
		_, err = reader.Exec(clustertest.Ctx(t), `SET application_name = 'nightly report'; SELECT count(*) FROM shard_0001.likes`)
		return err
	}
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	t.Logf("the move: %v", err)
	require.ErrorIs(t, err, ErrNotCleaned)
	require.Equal(t, PhaseFlipped, res.Phase)
	require.NotNil(t, reader)
	rec := moveRecord(t, cfg, res.ID)
	require.Equal(t, PhaseFlipped, rec.Phase)
	require.ErrorIs(t, err, shardmgr.ErrLockWait)
	require.ErrorContains(t, err, `application "nightly report"`, "the error names the reader")
	require.Contains(t, rec.Error, "nightly report", "the journal records why")

	// The new home serves: through the map, and its generator runs.
	require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
	routeLikes(t, r, shard, 5)
	_, err = dst.Exec(clustertest.Ctx(t), `SELECT shard_0001.next_id()`)
	require.NoError(t, err)

	require.NoError(t, reader.Rollback(clustertest.Ctx(t)))
	cl, err := Cleanup(clustertest.Ctx(t), clustertest.Handle(t, cfg), CleanupOptions{})
	require.NoError(t, err)
	require.Equal(t, []MoveRef{res.MoveRef}, cl.Finished)
	require.Equal(t, PhaseCleaned, moveRecord(t, cfg, res.ID).Phase)
	routeLikes(t, r, shard, 5)
	_, err = dst.Exec(clustertest.Ctx(t), `SELECT shard_0001.next_id()`)
	require.NoError(t, err)

	// No clamp travels on: the shard moves back and serves there.
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, from, MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	routeLikes(t, r, shard, 5)
	require.Len(t, likeIDs(t, cfg, shard), 65)
	requireVerifyOK(t, cfg)
}

// TestFlipIgnoresOutsidersAdvisoryLocks: once a move's source is fenced,
// a role that may only connect to the catalog's database takes the
// catalog's advisory locks (the keys of the old catalog writer's lock and
// of the init lock) for a minute. The flip does not wait for it: the
// writes are refused for about as long as without it.
func TestFlipIgnoresOutsidersAdvisoryLocks(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 50)
	opts := MoveOptions{Migrations: sampleSet(t)}
	opts.stopAfter = PhaseVerified
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, errStopped)

	conn, _ := clustertest.Outsider(t, cfg.Catalog, "squatter")
	_, err = conn.Exec(clustertest.Ctx(t), `SELECT pg_advisory_lock($1, 0), pg_advisory_lock($1, 1)`, catalog.LockClass)
	require.NoError(t, err)
	const hold = time.Minute
	released := time.AfterFunc(hold, func() { conn.Close(context.Background()) })
	defer released.Stop()
	opts.stopAfter = ""
	start := time.Now()
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	took := time.Since(start)
	require.NoError(t, err)
	t.Logf("the cut-over's end took %s, writes refused for %s in all, while an outsider held the catalog's advisory locks", took, res.Refused)
	require.Less(t, took, hold/4)
	require.Less(t, res.Refused, hold/4)
	routeLikes(t, r, 1, 5)
}

// TestFlipGivesUpOnHeldCatalog: when the catalog's cluster row stays
// locked (a catalog writer's session left in a transaction), the flip
// gives up within its bound, says who holds the row, and gives the source
// back: writes go through again. The move run later finishes.
func TestFlipGivesUpOnHeldCatalog(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 50)
	opts := MoveOptions{Migrations: sampleSet(t)}
	opts.stopAfter = PhaseVerified
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, errStopped)

	holder, err := clustertest.Pool(t, cfg.Catalog).Begin(clustertest.Ctx(t))
	require.NoError(t, err)
	_, err = holder.Exec(clustertest.Ctx(t), `SET application_name = 'forgotten psql'; SELECT * FROM shardid.cluster FOR UPDATE`)
	require.NoError(t, err)
	var pid int32
	require.NoError(t, holder.QueryRow(clustertest.Ctx(t), `SELECT pg_backend_pid()`).Scan(&pid))
	const hold = 2 * time.Minute
	released := time.AfterFunc(flipLockWait+5*time.Second, func() { holder.Rollback(context.Background()) })
	defer released.Stop()

	start := time.Now()
	opts.stopAfter = ""
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	took := time.Since(start)
	require.ErrorIs(t, err, shardmgr.ErrLockWait)
	require.ErrorContains(t, err, fmt.Sprintf("pid %d", pid))
	require.ErrorContains(t, err, `"forgotten psql"`)
	require.Less(t, took, hold/2)
	var lw *pg.LockWaitError
	require.ErrorAs(t, err, &lw)
	require.GreaterOrEqual(t, lw.Waited, flipLockWait-time.Second)

	// The give-back waited for the row too, and got it once released.
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, shardmgr.StateActive, m.Shards[1].State)
	require.NotEqual(t, "pg4", m.Shards[1].Host)
	routeLikes(t, r, 1, 5)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Len(t, likeIDs(t, cfg, 1), 55)
}

// A connect-only role holding the apply lock: apply waits at most its
// Wait and then names the session.
func TestApplyBusyNamesHolder(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 2)
	conn, role := clustertest.Outsider(t, cfg.Catalog, "squatter")
	_, err := conn.Exec(clustertest.Ctx(t), `SELECT pg_advisory_lock($1, 0)`, applyLockClass)
	require.NoError(t, err)
	_, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Wait: time.Second})
	require.ErrorIs(t, err, ErrApplyBusy)
	require.ErrorContains(t, err, fmt.Sprintf("(role %s, application %q", role, "squatter"))
}

// A move left as an older shardid left it when killed between its two
// transactions (phase verified, the target's copy opened and written to):
// abort refuses to drop that copy, and running the move finishes it with
// the row written there.
func TestAbortRefusesOpenedTarget(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 20)
	opts := MoveOptions{Migrations: sampleSet(t)}
	opts.stopAfter = PhaseVerified
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	rec := moveRecord(t, cfg, res.ID)
	dst := clustertest.HostPool(t, cfg, "pg4")
	require.NoError(t, pgx.BeginFunc(clustertest.Ctx(t), dst, func(tx pgx.Tx) error {
		if err := fence.Func(clustertest.Ctx(t), tx, rec.Schema, false); err != nil {
			return err
		}
		return fence.UnclampCounter(clustertest.Ctx(t), tx, rec.Schema, *rec.counterMax)
	}))
	var id int64
	require.NoError(t, dst.QueryRow(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (user_id, post_id) VALUES (1, 1) RETURNING id`).Scan(&id))

	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{1})
	require.ErrorIs(t, err, ErrTargetOpen)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Contains(t, likeIDs(t, cfg, 1), id)
}

// While the source is fenced, a role that may only connect to the target's
// database holds the shard's generator lock there (an advisory lock). The
// counter's carry waits for it only a bounded time, names it, and the
// source is given back; the move run later finishes.
func TestCarryGivesUpOnOutsidersGeneratorLock(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 20)
	opts := MoveOptions{Migrations: sampleSet(t), LockTimeout: 100 * time.Millisecond}
	opts.stopAfter = PhaseFenced
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, errStopped)

	h, _ := cfg.Host("pg4")
	conn, role := clustertest.Outsider(t, h.DSN, "squatter")
	_, err = conn.Exec(clustertest.Ctx(t), `SELECT pg_advisory_lock($1, 1)`, int64(shsql.LockClass))
	require.NoError(t, err)
	const hold = 2 * time.Minute
	released := time.AfterFunc(hold, func() { conn.Close(context.Background()) })
	defer released.Stop()

	opts.stopAfter = ""
	start := time.Now()
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.Less(t, time.Since(start), hold/2, "bounded, not the holder's hold")
	require.ErrorIs(t, err, shardmgr.ErrLockWait)
	require.ErrorContains(t, err, fmt.Sprintf("(role %s, application %q", role, "squatter"))
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, shardmgr.StateActive, m.Shards[1].State)
	require.NotEqual(t, "pg4", m.Shards[1].Host)
	routeLikes(t, r, 1, 5)

	require.NoError(t, conn.Close(context.Background()))
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Len(t, likeIDs(t, cfg, 1), 25)
}

package rebalance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// ApplyOptions adjust Apply. The zero value plans by count and runs one
// online move at a time.
type ApplyOptions struct {
	Plan PlanOptions
	// Parallel is how many moves run at once. Zero means one at a time.
	Parallel int
	// Move adjusts every move (mode, migrations, keep, progress).
	Move MoveOptions
	// Wait bounds how long Apply waits for another manager: another
	// Apply of the same cluster, or a manager running one of the moves.
	// Zero means DefaultApplyWait (1h).
	Wait time.Duration
	// BeforeChange, when set, is called once Apply holds its lock and its
	// preflight has passed on the connections its moves use (the catalog
	// and every host the plan involves), before Apply changes anything;
	// an error from it ends Apply with that error and nothing done. What
	// it changes in the catalog (a drain mark: shardid host drain marks
	// the host here, with c's handle) is read back before the moves are
	// planned: a drain that cannot reach the servers (all their
	// connection slots taken, a failed check) leaves no mark behind.
	BeforeChange func(ctx context.Context) error
}

// DefaultApplyWait is how long Apply waits, by default, for another
// manager's apply or move to finish.
const DefaultApplyWait = time.Hour

// applyLockClass is the first key of the session advisory lock, on the
// catalog, that Apply holds from start to end (second key 0): 'shra'. A
// second Apply waits for the first, then finds what is left to do.
const applyLockClass int32 = 0x73687261

// ApplyResult is what Apply did. JSON: {"resumed":N,"moves":[...],"elapsed_ms":N}.
type ApplyResult struct {
	// Resumed counts the unfinished moves of an earlier run that this
	// run finished first.
	Resumed int `json:"resumed"`
	// Moves are the moves run, in journal order.
	Moves []*MoveResult `json:"moves"`
	// Elapsed is the run's wall time (JSON: elapsed_ms).
	Elapsed time.Duration `json:"-"`
	// Generation is the catalog's generation at the end.
	Generation int64 `json:"generation"`
	// Waited is how long this run waited for another manager (another
	// apply, or a move someone else was running; JSON: waited_ms).
	Waited time.Duration `json:"-"`
	// FinishedByOthers are the moves this run found busy, waited for and
	// then found finished by the other manager: nothing left to do.
	FinishedByOthers []int64 `json:"finished_by_others,omitempty"`
}

// MarshalJSON writes the durations in milliseconds under their keys of
// old (elapsed_ms, waited_ms).
func (r ApplyResult) MarshalJSON() ([]byte, error) {
	type plain ApplyResult
	return json.Marshal(struct {
		plain
		ElapsedMS int64 `json:"elapsed_ms"`
		WaitedMS  int64 `json:"waited_ms,omitempty"`
	}{plain(r), r.Elapsed.Milliseconds(), r.Waited.Milliseconds()})
}

// Apply rebalances the cluster of cfg: it refuses a cluster file whose
// hosts the catalog does not have yet (ErrHostsNotApplied: install.Init
// applies them), finishes the moves an interrupted
// run left in the journal, then plans (PlanRebalance) and runs the plan's
// moves, opts.Parallel at a time. Before any of that it checks the hosts
// (the preflight, see PlanRebalance): a failed check returns a
// *PreflightError with nothing changed. Each move is journaled before it starts,
// so running Apply again after an interruption at any phase resumes it.
// Moves that fail leave their source serving; the others carry on, and
// Apply returns the result with a *shardmgr.ShardErrors.
func Apply(ctx context.Context, c *cluster.Cluster, opts ApplyOptions) (*ApplyResult, error) {
	start := time.Now()
	if opts.Parallel <= 0 {
		opts.Parallel = 1
	}
	if opts.Plan.By == "" {
		opts.Plan.By = ByCount
	}
	if err := opts.Plan.check(); err != nil {
		return nil, err
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultApplyWait
	}
	res := &ApplyResult{Moves: []*MoveResult{}}
	// One apply at a time per catalog: a second one waits, then plans
	// against what the first left, usually nothing.
	// The catalog is opened once, for the lock, the registration, the
	// plan and the moves.
	mo, err := newMover(ctx, c, opts.Move)
	if err != nil {
		return nil, err
	}
	unlock, waited, err := mo.waitApplyLock(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res.Waited = waited.Truncate(time.Millisecond) // whole ms, as reported
	opts.Plan.Mode, opts.Plan.Parallel = opts.Move.Mode, opts.Parallel
	opts.Plan.Migrations, opts.Plan.moving = opts.Move.Migrations, true
	open, err := readMoves(ctx, mo.catalog, catalog.OpenMoves)
	if err != nil {
		return nil, err
	}
	// The preflight, before anything changes: the plan as it would be
	// made now, and the open moves, against the hosts of the cluster file
	// (registered or not). A failed check refuses the whole apply.
	if _, err := planRebalance(ctx, c, mo.catalog, mo.pool, opts.Plan, open); err != nil {
		return nil, err
	}
	if opts.BeforeChange != nil {
		if err := opts.BeforeChange(ctx); err != nil {
			return nil, err
		}
		// The map as the hook left it (a drain mark, a new generation).
		if mo.m, err = shardmgr.ReadMap(ctx, mo.catalog); err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
	}
	if err := mo.hostsAgree(); err != nil {
		return nil, err
	}
	var failed []error
	runAll := func(recs []*MoveRecord, reasons map[int]string, batched bool) {
		out, errs, others, w := mo.runAll(ctx, recs, opts, batched)
		for _, r := range out {
			if r != nil {
				r.ModeReason = reasons[r.Shard]
			}
		}
		res.Moves = append(res.Moves, out...)
		res.FinishedByOthers = append(res.FinishedByOthers, others...)
		res.Waited += w.Truncate(time.Millisecond)
		failed = append(failed, errs...)
	}

	res.Resumed = len(open)
	runAll(open, nil, false) // one by one, as they were left

	if len(failed) == 0 {
		// Planned again now that the open moves are done; checked again
		// too, for the modes of the moves (the hosts rarely change in
		// between).
		plan, err := planRebalance(ctx, c, mo.catalog, mo.pool, opts.Plan, nil)
		if err != nil {
			return res, err
		}
		if len(plan.Moves) > 0 {
			recs, err := mo.journal(ctx, plan.Moves)
			if err != nil {
				return res, err
			}
			reasons := map[int]string{}
			for _, pm := range plan.Moves {
				reasons[pm.Shard] = pm.ModeReason
			}
			runAll(recs, reasons, true)
		}
	}
	res.Elapsed = time.Since(start)
	if gen, err := catalog.Generation(ctx, mo.catalog); err == nil {
		res.Generation = gen
	}
	if len(failed) > 0 {
		return res, &shardmgr.ShardErrors{Op: "apply", Total: len(res.Moves), Unit: "moves", Errs: failed}
	}
	return res, nil
}

// pollBusy is how often a manager waiting for another one looks again.
const pollBusy = 200 * time.Millisecond

// waitApplyLock takes the apply lock on a connection of its own, waiting
// (at most opts.Wait) while another manager holds it. The lock goes with
// the session if the process dies.
func (mo *mover) waitApplyLock(ctx context.Context, opts ApplyOptions) (unlock func(), waited time.Duration, err error) {
	// A connection of its own, taken out of the pool: the lock is the
	// session's and goes when the connection closes.
	pc, err := mo.catalog.Acquire(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: %w", err)
	}
	conn := pc.Hijack()
	start := time.Now()
	logged := false
	for {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock($1, 0)`, applyLockClass).Scan(&ok); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, 0, fmt.Errorf("catalog: %w", err)
		}
		if ok {
			if logged { // else free at the first try: nothing was waited for
				waited = time.Since(start)
			}
			return func() { conn.Close(context.WithoutCancel(ctx)) }, waited, nil
		}
		if !logged {
			if opts.Move.Logger != nil {
				opts.Move.Logger.Info("another rebalance apply is running; waiting for it", "wait", opts.Wait, "holder", applyLockHolders(ctx, conn))
			}
			logged = true
		}
		if err := sleepCtx(ctx, pollBusy); err != nil || time.Since(start) > opts.Wait {
			if err == nil {
				err = fmt.Errorf("rebalance apply: %w after %s: another rebalance apply holds the catalog (%s)", ErrApplyBusy, opts.Wait, applyLockHolders(ctx, conn))
			}
			conn.Close(context.WithoutCancel(ctx))
			return nil, 0, err
		}
	}
}

// applyLockHolders names the sessions holding the apply lock, for a
// message.
func applyLockHolders(ctx context.Context, conn *pgx.Conn) string {
	hs, err := pg.AdvisoryHolders(ctx, conn, int64(applyLockClass), 0)
	switch {
	case err != nil:
		return "held by a session unknown: " + pg.OneLine(err)
	case len(hs) == 0:
		return "let go meanwhile"
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.String()
	}
	return "held by " + strings.Join(parts, "; ")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitMove waits until no other manager works on rec, then runs what is
// left of it. byOther reports that the other manager had finished it.
func (mo *mover) waitMove(ctx context.Context, rec *MoveRecord, wait time.Duration) (res *MoveResult, byOther bool, err error) {
	start := time.Now()
	mo.log.Info("another manager is working on the move; waiting for it", "id", rec.ID, "shard", rec.Shard)
	for {
		fresh, err := readMoves(ctx, mo.catalog, `id = $1`, rec.ID)
		if err != nil {
			return &MoveResult{MoveRef: rec.MoveRef, Mode: rec.Mode, Phase: rec.Phase, Err: err}, false, err
		}
		*rec = *fresh[0]
		if !rec.Phase.Open() {
			r := &MoveResult{MoveRef: rec.MoveRef, Mode: rec.Mode, Phase: rec.Phase,
				Rows: rec.Rows, Bytes: rec.Bytes, RetiredSchema: rec.Retired}
			if rec.flipGen != nil {
				r.Generation = *rec.flipGen
			}
			return r, true, nil
		}
		r, err := mo.run(ctx, rec)
		if !errors.Is(err, ErrMoveBusy) {
			return r, false, err
		}
		if serr := sleepCtx(ctx, pollBusy); serr != nil || time.Since(start) > wait {
			if serr == nil {
				err = fmt.Errorf("%w after %s: %w", ErrApplyBusy, wait, err)
				r.Err = err
			}
			return r, false, err
		}
	}
}

// runEach runs moves one by one, opts.Parallel at a time, and returns
// their results in the order given with the errors of those that failed,
// and disables the subscriptions of those that failed. A move another
// manager is working on (ErrMoveBusy: a shardid shard move, an abort, an
// apply) is waited for, at most opts.Wait: when the other manager finished
// or aborted it there is nothing left to do, which is no failure (others
// lists it); when it left the move unfinished, this run takes it over.
// waited sums the time spent waiting.
func (mo *mover) runEach(ctx context.Context, recs []*MoveRecord, opts ApplyOptions) (out []*MoveResult, failed []error, others []int64, waited time.Duration) {
	out = make([]*MoveResult, len(recs))
	var stopped []*MoveRecord // failed here: their subscriptions are disabled at the end
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(max(opts.Parallel, 1))
	for i, rec := range recs {
		g.Go(func() error {
			if ctx.Err() != nil {
				out[i] = &MoveResult{MoveRef: rec.MoveRef, Mode: rec.Mode, Phase: rec.Phase, Err: ctx.Err()}
				mu.Lock()
				failed = append(failed, ctx.Err())
				mu.Unlock()
				return nil
			}
			r, err := mo.run(ctx, rec)
			var byOther bool
			var w time.Duration
			if errors.Is(err, ErrMoveBusy) {
				start := time.Now()
				r, byOther, err = mo.waitMove(ctx, rec, opts.Wait)
				w = time.Since(start)
			}
			out[i] = r
			mu.Lock()
			defer mu.Unlock()
			waited += w
			if err != nil {
				failed = append(failed, err)
				if !errors.Is(err, ErrMoveBusy) && !errors.Is(err, errStopped) {
					stopped = append(stopped, rec)
				}
			}
			if byOther {
				others = append(others, rec.ID)
			}
			return nil
		})
	}
	_ = g.Wait()
	mo.stopSubscriptions(ctx, stopped)
	slices.Sort(others)
	return out, failed, others, waited
}

// PlanApply is the plan Apply would run now with opts, checked as Apply
// checks it before it changes anything (the preflight, for opts.Move's
// mode and with its migrations: none when nil, as Apply), including the
// unfinished moves Apply would resume. It changes nothing; a failed check
// returns the plan with a *PreflightError. A drain (shardid host drain)
// asks it before it marks the host, so that a drain refused by the
// preflight leaves no mark behind.
func PlanApply(ctx context.Context, c *cluster.Cluster, opts ApplyOptions) (*Plan, error) {
	if err := opts.Plan.check(); err != nil {
		return nil, err
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 1
	}
	cat, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	open, err := readMoves(ctx, cat, catalog.OpenMoves)
	if err != nil {
		return nil, err
	}
	opts.Plan.Mode, opts.Plan.Parallel = opts.Move.Mode, opts.Parallel
	opts.Plan.Migrations, opts.Plan.moving = opts.Move.Migrations, true
	return planRebalance(ctx, c, cat, func(ctx context.Context, name string) (*pgxpool.Pool, error) {
		return c.HostPool(ctx, name, cluster.Session{})
	}, opts.Plan, open)
}

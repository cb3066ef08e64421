package rebalance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Apply runs a plan's new online moves in batches: the moves from one
// source to one target share a publication, a slot and a subscription
// (batch, in replication_batch.go), so the target's server starts one
// worker for them, once, and Parallel never needs more workers than the
// target has. A batch's moves are built and copied together; the target's
// subscriptions are created in one transaction, so its launcher starts
// them in one pass (its pause between starts, wal_retrieve_retry_interval,
// is paid once per wave, not once per move); then each move goes on alone,
// Parallel at a time: catch-up, fence, check, flip and cleanup are per
// shard, and the batch's replication goes with its last move.
//
// A target gets no more batches at once than it has free logical
// replication workers (a wave); the next wave starts when one is done.

// pairOf is a batch's key: one source, one target.
type pairOf struct{ from, to string }

// runAll runs moves, opts.Parallel at a time, and returns their results
// in the order given with the errors of those that failed. With batched
// (the moves this run just journaled), its online moves go in batches
// (runBatched); the others, and the moves of an earlier run, one by one
// (runEach).
func (mo *mover) runAll(ctx context.Context, recs []*MoveRecord, opts ApplyOptions, batched bool) (out []*MoveResult, failed []error, others []int64, waited time.Duration) {
	if !batched {
		return mo.runEach(ctx, recs, opts)
	}
	var fresh, rest []int
	for i, rec := range recs {
		if rec.Mode == MoveOnline && rec.Phase == PhasePlanned && mo.opts.stopAfter == "" {
			fresh = append(fresh, i)
		} else {
			rest = append(rest, i)
		}
	}
	out = make([]*MoveResult, len(recs))
	merge := func(idx []int, batched bool) {
		sel := make([]*MoveRecord, len(idx))
		for j, i := range idx {
			sel[j] = recs[i]
		}
		var o []*MoveResult
		var f []error
		var ot []int64
		var w time.Duration
		if batched {
			o, f, ot, w = mo.runBatched(ctx, sel, opts)
		} else {
			o, f, ot, w = mo.runEach(ctx, sel, opts)
		}
		for j, i := range idx {
			out[i] = o[j]
		}
		failed, others, waited = append(failed, f...), append(others, ot...), waited+w
	}
	if len(rest) > 0 {
		merge(rest, false)
	}
	if len(fresh) > 0 {
		merge(fresh, true)
	}
	return out, failed, others, waited
}

// runBatched runs new online moves in batches, wave after wave.
func (mo *mover) runBatched(ctx context.Context, recs []*MoveRecord, opts ApplyOptions) (out []*MoveResult, failed []error, others []int64, waited time.Duration) {
	out = make([]*MoveResult, len(recs))
	index := map[*MoveRecord]int{}
	groups := map[pairOf][]*MoveRecord{}
	var order []pairOf
	for i, rec := range recs {
		index[rec] = i
		k := pairOf{rec.From, rec.To}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], rec)
	}
	free := map[string]int{}
	assigned := map[string]int{}
	var waves [][]pairOf
	for _, k := range order {
		f, ok := free[k.to]
		if !ok {
			f = mo.freeWorkers(ctx, k.to)
			free[k.to] = f
		}
		w := assigned[k.to] / f
		assigned[k.to]++
		for len(waves) <= w {
			waves = append(waves, nil)
		}
		waves[w] = append(waves[w], k)
	}
	for _, wave := range waves {
		prepFailed := mo.prepareWave(ctx, wave, groups, opts)
		var next []*MoveRecord
		for _, k := range wave {
			for _, rec := range groups[k] {
				if err, ok := prepFailed[rec]; ok {
					out[index[rec]] = &MoveResult{MoveRef: rec.MoveRef, Mode: rec.Mode, Phase: rec.Phase, Rows: rec.Rows, Bytes: rec.Bytes, Err: err}
					failed = append(failed, err)
					continue
				}
				next = append(next, rec)
			}
		}
		o, f, ot, w := mo.runEach(ctx, next, opts)
		for j, rec := range next {
			out[index[rec]] = o[j]
		}
		failed, others, waited = append(failed, f...), append(others, ot...), waited+w
	}
	return out, failed, others, waited
}

// freeWorkers is how many more subscriptions target name can run: its
// free logical replication workers and background workers, at least 1
// (a batch that then finds none fails at once, naming the setting).
func (mo *mover) freeWorkers(ctx context.Context, name string) int {
	dst, err := mo.pool(ctx, name)
	if err != nil {
		return 1
	}
	ws, err := readWorkerSlots(ctx, dst, "")
	if err != nil {
		return 1
	}
	return max(1, min(ws.max-ws.used, ws.bgMax-ws.bgUsed))
}

// prepareWave takes the moves of a wave's batches to phase copy: each
// move's target built (Parallel at a time), each batch's rows copied at
// its slot's snapshot (batches Parallel at a time), and each target's
// subscriptions created in one transaction. It holds the moves' locks
// throughout. A move another manager holds, or that moved on meanwhile,
// is left to runEach; it returns the moves that failed, with their
// journaled errors.
func (mo *mover) prepareWave(ctx context.Context, wave []pairOf, groups map[pairOf][]*MoveRecord, opts ApplyOptions) map[*MoveRecord]error {
	var mu sync.Mutex
	failures := map[*MoveRecord]error{}
	fail := func(mv *move, st step, err error) {
		err = mo.stepFailed(ctx, mv, st, err)
		mu.Lock()
		failures[mv.MoveRecord] = err
		mu.Unlock()
	}
	var unlocks []func()
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	build, _ := nextStep(MoveOnline, PhasePlanned)
	copyStep, _ := nextStep(MoveOnline, PhaseSchema)
	var batches []*batch
	for _, k := range wave {
		b := &batch{}
		for _, rec := range groups[k] {
			unlock, err := mo.lockMove(ctx, rec)
			if err != nil {
				continue // runEach waits for the other manager
			}
			unlocks = append(unlocks, unlock)
			fresh, err := readMoves(ctx, mo.catalog, `id = $1`, rec.ID)
			if err != nil || fresh[0].Phase != PhasePlanned {
				continue
			}
			*rec = *fresh[0]
			b.moves = append(b.moves, &move{MoveRecord: rec})
		}
		if len(b.moves) > 0 {
			batches = append(batches, b)
		}
	}

	// Each move's target, Parallel at a time.
	g := errgroup.Group{}
	g.SetLimit(max(opts.Parallel, 1))
	for _, b := range batches {
		for _, mv := range b.moves {
			g.Go(func() error {
				mo.starting(mv, build)
				err := mo.open(ctx, mv)
				if err == nil {
					err = build.run(mo, ctx, mv)
				}
				if err != nil {
					fail(mv, build, err)
				}
				return nil
			})
		}
	}
	_ = g.Wait()

	// Each batch's copy, Parallel batches at a time.
	var copied []*batch
	g = errgroup.Group{}
	g.SetLimit(max(opts.Parallel, 1))
	for _, b := range batches {
		var ok []*move
		for _, mv := range b.moves {
			if _, bad := failures[mv.MoveRecord]; !bad {
				ok = append(ok, mv)
			}
		}
		if len(ok) == 0 {
			continue
		}
		b.moves, b.name = ok, ok[0].replName
		g.Go(func() error {
			for _, mv := range b.moves {
				mo.starting(mv, copyStep)
			}
			if err := mo.copyBatch(ctx, b); err != nil {
				mo.dropBatchQuietly(ctx, b)
				for _, mv := range b.moves {
					fail(mv, copyStep, err)
				}
				return nil
			}
			mu.Lock()
			copied = append(copied, b)
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()

	// Each target's subscriptions, in one transaction.
	byTarget := map[string][]*batch{}
	var targets []string
	for _, b := range copied {
		to := b.moves[0].To
		if _, ok := byTarget[to]; !ok {
			targets = append(targets, to)
		}
		byTarget[to] = append(byTarget[to], b)
	}
	for _, to := range targets {
		bs := byTarget[to]
		if err := mo.subscribe(ctx, bs[0].moves[0].dst, to, bs); err != nil {
			for _, b := range bs {
				mo.dropBatchQuietly(ctx, b)
				for _, mv := range b.moves {
					fail(mv, copyStep, err)
				}
			}
			continue
		}
		for _, b := range bs {
			// A move whose phase was not recorded finds its batch's
			// subscription when it is resumed.
			if err := b.recordCopied(ctx, mo); err != nil {
				for _, mv := range b.moves {
					if mv.Phase != PhaseCopy {
						fail(mv, copyStep, err)
					}
				}
			}
		}
	}
	return failures
}

// dropBatchQuietly drops a batch that could not start, as far as the hosts
// answer: a resumed move starts over.
func (mo *mover) dropBatchQuietly(ctx context.Context, b *batch) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	mv := b.moves[0]
	if err := dropBatch(ctx, mv.src, mv.dst, b.name); err != nil && !errors.Is(err, context.Canceled) {
		mo.log.Warn("could not drop a batch that failed to start (a resume of its moves drops it)", "name", b.name, "err", fmt.Sprint(err))
	}
}

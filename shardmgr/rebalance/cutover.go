package rebalance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// prepareCutover, for an online move, sums the changes logged since its
// copy, or scans the copy on both hosts when this run did not copy it or
// a table was truncated since (see cutover_delta.go), before the fence;
// then it waits until the target is close behind the source again, which
// a scan may have slowed. Should it fail, the change logging is taken
// away.
func (mo *mover) prepareCutover(ctx context.Context, mv *move) (err error) {
	src, dst := mv.src, mv.dst
	repl, err := replNameOf(ctx, src, dst, mv.MoveRecord)
	if err != nil {
		return err
	}
	if err := enableSubscription(ctx, dst, repl); err != nil { // a failed cut-over disabled it
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	watch, err := watchApply(ctx, dst, repl)
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	t0 := time.Now()
	defer func() {
		if err != nil {
			mo.dropDeltas(ctx, mv.MoveRecord)
		}
	}()
	ps := mo.takeCopied(mv.ID)
	if ps != nil {
		ok, err := ps.fold(ctx, src, dst, mv.MoveRecord)
		if err != nil {
			return err
		}
		if ok {
			mo.log.Info("summed the changes since the copy", "id", mv.ID, "tables", len(ps.tables), "took", time.Since(t0))
		} else {
			ps = nil
		}
	}
	if ps == nil {
		if ps, err = mo.prescan(ctx, src, dst, mv.MoveRecord); err != nil {
			return err
		}
		mo.log.Info("scanned before the fence", "id", mv.ID, "tables", len(ps.tables), "took", time.Since(t0))
	}
	if mo.opts.afterScans != nil {
		if err := mo.opts.afterScans(ctx, src, dst); err != nil {
			return err
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		near, err := mo.closeEnough(ctx, src, dst, mv.MoveRecord)
		if err != nil {
			return err
		}
		if near {
			mv.prescan = ps
			return nil
		}
		if err := watch.check(ctx, mv); err != nil {
			return err
		}
		if time.Since(t0) > mo.opts.CatchupTimeout {
			return fmt.Errorf("%w: the target did not come close behind the source again within %s (the catch-up timeout) after the scans", ErrCatchupTimeout, mo.opts.CatchupTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// fence marks the shard moving in the catalog (routers refuse writes) and
// fences the source (stale writers are refused too, and its counter
// stops).
func (mo *mover) fence(ctx context.Context, mv *move) error {
	src := mv.src
	if mv.Mode == MoveOnline {
		if err := mo.prepareCutover(ctx, mv); err != nil {
			return err
		}
	}
	_, err := catalog.Change(ctx, mo.catalog, 0, fmt.Sprintf("move %d: shard %d moving %s -> %s", mv.ID, mv.Shard, mv.From, mv.To), func(tx pgx.Tx, gen int64) error {
		return catalog.FenceShard(ctx, tx, gen, mv.key())
	})
	if err != nil {
		mo.dropDeltas(ctx, mv.MoveRecord)
		return err
	}
	err = fence.Raise(ctx, src, mv.Schema, mo.opts.LockTimeout)
	if err == nil {
		start := time.Now()
		err = pg.WithLockRetry(ctx, src, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
			_, err := fence.ClampCounter(ctx, tx, mv.Schema, mv.Shard)
			return err
		})
		if pg.IsLockTimeout(err) {
			err = shardschema.GeneratorLockWait(ctx, src, mv.Shard, start)
		}
	}
	if err != nil {
		// The catalog says moving: the caller lifts that.
		mv.Phase = PhaseFenced
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	if err := setPhase(ctx, mo.catalog, mv.MoveRecord, PhaseFenced); err != nil {
		return err
	}
	if mo.opts.afterFence != nil {
		mo.opts.afterFence(mv.Shard)
	}
	return nil
}

// flipLockWait bounds the flip's wait for the catalog's cluster row, while
// the shard's writes are refused: when it runs out the flip gives up and
// the source is given back (a move run again cuts over again).
const flipLockWait = 10 * time.Second

// flip is the move's point of no return. One catalog transaction places
// the shard on the target and records the journal's phase flipped; only
// once it committed is the target's copy opened (openTarget). Until then
// both copies refuse writes, so no write lands on a copy the catalog does
// not name: a flip that fails in the catalog leaves the target fenced and
// gives the source back; one killed after the catalog's commit leaves the
// journal at flipped, and the move run again opens the target (abort
// refuses a flipped move).
func (mo *mover) flip(ctx context.Context, mv *move) error {
	if mv.counterMax == nil {
		return fmt.Errorf("move %d: the journal has no counter range (phase schema not recorded)", mv.ID)
	}
	var refused int64
	// A catalog that does not answer at all is given up on too: writes
	// are refused meanwhile. Should the commit's answer be what is lost,
	// failed reads the journal to learn which side the move is on.
	fctx, cancel := context.WithTimeout(ctx, flipLockWait+20*time.Second)
	defer cancel()
	gen, err := catalog.ChangeWithin(fctx, mo.catalog, 0, flipLockWait, fmt.Sprintf("move %d: shard %d %s -> %s", mv.ID, mv.Shard, mv.From, mv.To), func(tx pgx.Tx, gen int64) error {
		if mo.opts.flipCatalog != nil {
			if err := mo.opts.flipCatalog(); err != nil {
				return err
			}
		}
		// The point of no return, recorded in the transaction that flips.
		// The refused window so far too: a flip whose target is opened
		// only by a later run has a figure meanwhile; openTarget adds the
		// rest.
		var err error
		refused, err = catalog.FlipShard(fctx, tx, gen, mv.key())
		return err
	})
	if err != nil {
		return err
	}
	// This is the point of no return: the catalog names the target.
	// Nothing from here on fences it or stops its counter.
	mv.Phase, mv.flipGen, mv.RefusedMS, mv.Error = PointOfNoReturn, &gen, &refused, ""
	if err := mo.crashPoint(crashFlipCommitted); err != nil {
		return err
	}
	if mo.opts.afterFlip != nil {
		mo.opts.afterFlip()
	}
	if err := mo.openTarget(ctx, mv); err != nil {
		return err
	}
	mo.log.Info("flipped", "id", mv.ID, "shard", mv.Shard, "to", mv.To, "generation", gen, "refused", time.Duration(*mv.RefusedMS)*time.Millisecond)
	return mo.crashPoint(crashTargetOpened)
}

// openTarget lets the target's copy take writes once the catalog names it:
// its fence function swapped to the open body, its change log muted and
// its counter given its range. Function swaps and the counter's range
// only: no table lock to wait for while writes are refused (cleanup drops
// the triggers). It is idempotent, and it is the only thing that opens a
// target: the flip runs it after the catalog's commit, and a flipped
// move's cleanup (or a failed step after the flip) runs it again, in case
// the flip was interrupted before it.
func (mo *mover) openTarget(ctx context.Context, mv *move) error {
	if !mv.Phase.PastNoReturn() {
		return fmt.Errorf("move %d: the target is opened only once the catalog names it (phase %s)", mv.ID, mv.Phase)
	}
	if mv.counterMax == nil {
		return fmt.Errorf("move %d: the journal has no counter range (phase schema not recorded)", mv.ID)
	}
	if mv.flipGen == nil {
		return fmt.Errorf("move %d: the journal has no flip generation", mv.ID)
	}
	err := pg.WithLockRetry(ctx, mv.dst, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := muteDelta(ctx, tx, mv.MoveRecord); err != nil {
			return err
		}
		// The host's own record says, with the opening, that the live
		// copy is here as of the flip's generation: what shows a catalog
		// restored from before the flip to be older than the hosts.
		if err := shardschema.RecordLocalShard(ctx, tx, mv.Shard, mv.Schema, string(shardmgr.StateActive), *mv.flipGen); err != nil {
			return err
		}
		// Only where a fence is: a cleanup that already dropped it is
		// not given a stray function.
		var fenced bool
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regprocedure($1) IS NOT NULL`, fence.FuncName(mv.Schema)+"()").Scan(&fenced); err != nil {
			return err
		}
		if fenced {
			if err := fence.Func(ctx, tx, mv.Schema, false); err != nil {
				return err
			}
		}
		return fence.UnclampCounter(ctx, tx, mv.Schema, *mv.counterMax)
	})
	if err != nil {
		return fmt.Errorf("target %s: open the copy: %w", mv.To, err)
	}
	// The refused window ends now that the target takes writes. Best
	// effort: the copy is open whatever the journal says of it.
	if err := endRefused(ctx, mo.catalog, mv.MoveRecord); err != nil {
		mo.log.Warn("the target takes writes; the journal counts its refused window on until the target's next opening (the move's cleanup)", "id", mv.ID, "err", err)
	}
	return nil
}

// endRefused ends move rec's refused window in the journal (q: the catalog,
// or the transaction that lets the shard's writes through) and records it
// in rec. A window the journal could not end is counted on by the next
// end.
func endRefused(ctx context.Context, q pg.Querier, rec *MoveRecord) error {
	refused, err := catalog.JournalRefusedEnd(ctx, q, rec.ID)
	if err != nil {
		return fmt.Errorf("move %d: journal the refused window: %w", rec.ID, err)
	}
	if refused != nil {
		rec.RefusedMS = refused
	}
	return nil
}

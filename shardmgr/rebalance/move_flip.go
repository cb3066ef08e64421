package rebalance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shardid/shardid/shardmgr/internal/catalog"
	"github.com/shardid/shardid/shardmgr/internal/fence"
	"github.com/shardid/shardid/shardmgr/internal/pg"
)

// prepareCutover, for an online move, scans the copy on both hosts before
// the fence (see move_delta.go) and then waits until the target is close
// behind the source again, which the scans may have slowed. Should it
// fail, the change logging it started is taken away.
func (mo *mover) prepareCutover(ctx context.Context, rec *MoveRecord) (err error) {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	t0 := time.Now()
	ps, err := mo.prescan(ctx, src, dst, rec)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			mo.dropDeltas(ctx, rec)
		}
	}()
	mo.log.Info("scanned before the fence", "id", rec.ID, "tables", len(ps.tables), "took", time.Since(t0))
	if mo.opts.afterScans != nil {
		if err := mo.opts.afterScans(ctx, src, dst); err != nil {
			return err
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		near, err := mo.closeEnough(ctx, src, dst, rec)
		if err != nil {
			return err
		}
		if near {
			rec.prescan = ps
			return nil
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
func (mo *mover) fence(ctx context.Context, rec *MoveRecord) error {
	src, err := mo.pool(ctx, rec.From)
	if err != nil {
		return err
	}
	if rec.Mode == MoveOnline {
		if err := mo.prepareCutover(ctx, rec); err != nil {
			return err
		}
	}
	_, err = catalog.Change(ctx, mo.catalog, 0, fmt.Sprintf("move %d: shard %d moving %s -> %s", rec.ID, rec.Shard, rec.From, rec.To), func(tx pgx.Tx, gen int64) error {
		tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET state = 'moving', changed_generation = $3
			WHERE id = $1 AND host = $2 AND state IN ('active', 'moving')`, rec.Shard, rec.From, gen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("shard %d is no longer active on %s in the catalog", rec.Shard, rec.From)
		}
		_, err = tx.Exec(ctx, `UPDATE shardid.moves SET fenced_at = coalesce(fenced_at, pg_catalog.clock_timestamp()) WHERE id = $1`, rec.ID)
		return err
	})
	if err != nil {
		mo.dropDeltas(ctx, rec)
		return err
	}
	err = fence.Raise(ctx, src, rec.Schema, mo.opts.LockTimeout)
	if err == nil {
		err = pg.WithLockRetry(ctx, src, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
			_, err := fence.ClampCounter(ctx, tx, rec.Schema, rec.Shard)
			return err
		})
	}
	if err != nil {
		// The catalog says moving: the caller lifts that.
		rec.Phase = PhaseFenced
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	return setPhase(ctx, mo.catalog, rec, PhaseFenced, "")
}

// flip lifts the target's fence and points the catalog at it; the
// journal's phase changes in the same catalog transaction.
func (mo *mover) flip(ctx context.Context, rec *MoveRecord) error {
	dst, err := mo.pool(ctx, rec.To)
	if err != nil {
		return err
	}
	// Function swaps and the counter's range only: no table lock to wait
	// for while writes are refused. Cleanup drops the triggers.
	err = pg.WithLockRetry(ctx, dst, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := muteDelta(ctx, tx, rec); err != nil {
			return err
		}
		if err := fence.Func(ctx, tx, rec.Schema, false); err != nil {
			return err
		}
		if rec.counterMax == nil {
			return fmt.Errorf("move %d: the journal has no counter range (phase schema not recorded)", rec.ID)
		}
		return fence.UnclampCounter(ctx, tx, rec.Schema, *rec.counterMax)
	})
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	rec.targetOpened = true
	var refused int64
	gen, err := catalog.Change(ctx, mo.catalog, 0, fmt.Sprintf("move %d: shard %d %s -> %s", rec.ID, rec.Shard, rec.From, rec.To), func(tx pgx.Tx, gen int64) error {
		if mo.opts.flipCatalog != nil {
			if err := mo.opts.flipCatalog(); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET host = $2, state = 'active', changed_generation = $4
			WHERE id = $1 AND host = $3 AND state = 'moving'`, rec.Shard, rec.To, rec.From, gen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("shard %d is no longer moving from %s in the catalog", rec.Shard, rec.From)
		}
		return tx.QueryRow(ctx, `UPDATE shardid.moves SET phase = 'flipped', flip_generation = $2, updated_at = pg_catalog.clock_timestamp(),
				refused_ms = (extract(epoch FROM pg_catalog.clock_timestamp() - fenced_at) * 1000)::bigint
			WHERE id = $1 AND phase = 'verified' RETURNING refused_ms`, rec.ID, gen).Scan(&refused)
	})
	if err != nil {
		return err
	}
	rec.Phase, rec.flipGen, rec.refusedMS = PhaseFlipped, &gen, &refused
	mo.log.Info("flipped", "id", rec.ID, "shard", rec.Shard, "to", rec.To, "generation", gen, "refused", time.Duration(refused)*time.Millisecond)
	return nil
}

// refenceTarget raises the target's fence and stops its counter again
// after a flip that opened them and then failed in the catalog.
func (mo *mover) refenceTarget(ctx context.Context, rec *MoveRecord) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	dst, err := mo.pool(ctx, rec.To)
	if err != nil {
		return err
	}
	err = pg.WithLockRetry(ctx, dst, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := fence.Func(ctx, tx, rec.Schema, true); err != nil {
			return err
		}
		_, err := fence.ClampCounter(ctx, tx, rec.Schema, rec.Shard)
		return err
	})
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	rec.targetOpened = false
	return nil
}

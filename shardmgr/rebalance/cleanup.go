package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// CleanupOptions adjust Cleanup.
type CleanupOptions struct {
	// All drops every retired copy, also those still inside their keep
	// period.
	All bool
}

// RetiredCopy is a moved shard's old copy that Cleanup dropped.
type RetiredCopy struct {
	MoveID int64  `json:"move"`
	Shard  int    `json:"shard"`
	Host   string `json:"host"`
	Schema string `json:"schema"`
}

// KeptCopy is a retired copy that Cleanup left alone: its keep period
// (MoveOptions.Keep, set when the shard moved) ends at KeepUntil.
type KeptCopy struct {
	RetiredCopy
	KeepUntil time.Time `json:"keep_until"`
}

// CleanupResult is what Cleanup did. JSON:
// {"dropped":[...],"kept":N,"kept_copies":[{...,"keep_until":"..."}]}.
type CleanupResult struct {
	Dropped []RetiredCopy `json:"dropped"`
	// Kept counts retired copies still inside their keep period;
	// KeptCopies lists them, the earliest to expire first.
	Kept       int        `json:"kept"`
	KeptCopies []KeptCopy `json:"kept_copies"`
	// Finished are the flipped moves whose unfinished cleanup (see
	// ErrNotCleaned) this run finished first.
	Finished []MoveRef `json:"finished,omitempty"`
}

// Cleanup finishes the moves that flipped but whose cleanup did not finish
// (ErrNotCleaned), then drops the retired copies (shard_NNNN_moved_gG on
// the old host) of finished moves whose keep period has passed, or all of
// them with opts.All. A move it could not finish is in the error; the
// retired copies are dropped all the same.
func Cleanup(ctx context.Context, c *cluster.Cluster, opts CleanupOptions) (*CleanupResult, error) {
	mo, err := newMover(ctx, c, MoveOptions{})
	if err != nil {
		return nil, err
	}
	res := &CleanupResult{Dropped: []RetiredCopy{}, KeptCopies: []KeptCopy{}}
	// Moves that flipped and stopped before their cleanup finished (a lock
	// a long transaction held, a crash): finished first.
	flipped, err := readMoves(ctx, mo.catalog, catalog.PastNoReturnMoves)
	if err != nil {
		return nil, err
	}
	var unfinished []error
	for _, rec := range flipped {
		r, err := mo.run(ctx, rec)
		switch {
		case errors.Is(err, ErrMoveBusy): // another manager finishes it
		case err != nil:
			unfinished = append(unfinished, err)
		default:
			res.Finished = append(res.Finished, r.MoveRef)
		}
	}
	recs, err := readMoves(ctx, mo.catalog, retainedMoves, string(PhaseCleaned))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, rec := range recs {
		if !opts.All && rec.keepUntil != nil && rec.keepUntil.After(now) {
			res.Kept++
			res.KeptCopies = append(res.KeptCopies, KeptCopy{
				RetiredCopy: RetiredCopy{MoveID: rec.ID, Shard: rec.Shard, Host: rec.From, Schema: rec.Retired},
				KeepUntil:   rec.keepUntil.UTC(),
			})
			continue
		}
		src, err := mo.pool(ctx, rec.From)
		if err != nil {
			return res, err
		}
		if _, err := src.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{rec.Retired}.Sanitize()+` CASCADE`); err != nil {
			return res, fmt.Errorf("host %s: drop %s: %w", rec.From, rec.Retired, err)
		}
		if err := catalog.JournalRetiredDropped(ctx, mo.catalog, rec.ID); err != nil {
			return res, fmt.Errorf("move %d: %w", rec.ID, err)
		}
		res.Dropped = append(res.Dropped, RetiredCopy{MoveID: rec.ID, Shard: rec.Shard, Host: rec.From, Schema: rec.Retired})
	}
	slices.SortStableFunc(res.KeptCopies, func(a, b KeptCopy) int { return a.KeepUntil.Compare(b.KeepUntil) })
	return res, errors.Join(unfinished...)
}

// cleanup records the shard as the target's own, removes the replication
// objects and retires the source's copy: renamed and still fenced, or
// dropped when it is not to be kept.
func (mo *mover) cleanup(ctx context.Context, mv *move) error {
	src, dst := mv.src, mv.dst
	gen := *mv.flipGen
	// A flip interrupted between the catalog's commit and the opening
	// left the shard's home refusing writes: opened first.
	if err := mo.openTarget(ctx, mv); err != nil {
		return err
	}
	if err := shardschema.RecordLocalShard(ctx, dst, mv.Shard, mv.Schema, "active", gen); err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	if _, err := dst.Exec(ctx, fmt.Sprintf(`COMMENT ON SCHEMA %s IS NULL`, pgx.Identifier{mv.Schema}.Sanitize())); err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	// The flip left the target's fence and change log open; their
	// triggers go now, writes flowing.
	if err := mo.dropMoveTriggers(ctx, dst, mv.MoveRecord); err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	if err := dropReplication(ctx, src, dst, mv.MoveRecord); err != nil {
		return err
	}
	retired := fence.RetiredSchema(mv.Schema, gen)
	drop := mv.keep < 0
	err := pgx.BeginFunc(ctx, src, func(tx pgx.Tx) error {
		var has bool
		if err := tx.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, pgx.Identifier{mv.Schema}.Sanitize()).Scan(&has); err != nil {
			return err
		}
		if has {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = 0`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER SCHEMA %s RENAME TO %s`, pgx.Identifier{mv.Schema}.Sanitize(), pgx.Identifier{retired}.Sanitize())); err != nil {
				return err
			}
		}
		if drop {
			if _, err := tx.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{retired}.Sanitize()+` CASCADE`); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM shardid.local_shards WHERE shard = $1 AND schema_name = $2`, mv.Shard, mv.Schema)
		return err
	})
	if err != nil {
		return fmt.Errorf("source %s: retire %s: %w", mv.From, mv.Schema, err)
	}
	mv.Retired = retired
	return setPhaseBy(mv.MoveRecord, PhaseCleaned, func(s catalog.Step) error { return catalog.JournalCleaned(ctx, mo.catalog, s, retired, mv.keep) })
}

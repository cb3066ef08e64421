package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// verifyCopy makes sure the target has every change (online: the slot
// confirmed the source's WAL position taken after the fence), carries the
// counter over and compares row counts and checksums table by table.
func (mo *mover) verifyCopy(ctx context.Context, mv *move) error {
	src, dst := mv.src, mv.dst
	if mv.Mode == MoveOnline {
		// A run that failed with the source left fenced disabled the
		// subscription; this one needs it.
		repl, err := replNameOf(ctx, src, dst, mv.MoveRecord)
		if err == nil {
			err = enableSubscription(ctx, dst, repl)
		}
		if err != nil {
			return err
		}
		watch, err := watchApply(ctx, dst, repl)
		if err != nil {
			return fmt.Errorf("target %s: %w", mv.To, err)
		}
		const what = "wait for the target to apply every change made before the fence"
		wctx, cancel := context.WithTimeout(ctx, mo.opts.CutoverTimeout)
		n, err := bumpMark(wctx, src, mv.MoveRecord)
		if err != nil {
			// The source's own statement failed: nothing the target's
			// apply worker did, and the source's server says why.
			cancel()
			return fmt.Errorf("%s: source %s: %w", what, mv.From, err)
		}
		err = waitMark(wctx, dst, mv.MoveRecord, n)
		if err == nil {
			err = flushWAL(wctx, dst)
		}
		cancel()
		if err != nil {
			if pg.NotAnswering(err) && !errors.Is(err, context.DeadlineExceeded) {
				// The target's server did not answer the move's own
				// connection: not its apply worker's failure (a wait
				// that ran out is, and passes for a net.Error).
				return fmt.Errorf("%s: target %s: %w", what, mv.To, err)
			}
			// Say why the target did not follow, when the move can tell.
			if werr := watch.check(ctx, mv); werr != nil {
				return fmt.Errorf("%s: %w (%w)", what, werr, err)
			}
			return fmt.Errorf("%s: target %s: %w%s", what, mv.To, err, replicationCause(ctx, mv))
		}
	}
	if err := mo.carryCounter(ctx, src, dst, mv.MoveRecord); err != nil {
		return err
	}
	sv, _, err := migrate.ReadShardVersion(ctx, src, mv.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	if sv != mv.Version {
		return fmt.Errorf("%w: the source was migrated to version %d during the move (the target is at %d)", ErrMoveCheck, sv, mv.Version)
	}
	tables, err := rowTables(ctx, src, mv.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	if err := sameKeys(ctx, src, dst, mv.Schema); err != nil {
		return err
	}
	if err := samePartitions(ctx, src, dst, mv.Schema); err != nil {
		return err
	}
	t0 := time.Now()
	var rows int64
	checked := false
	if ps := mv.prescan; ps != nil && ps.sameTables(tables) {
		if rows, checked, err = compareDelta(ctx, src, dst, mv.MoveRecord, ps); err != nil {
			return err
		}
	}
	how := "changes since the scans"
	if mv.prescan != nil && mv.prescan.fromCopy {
		how = "changes since the copy"
	}
	if !checked {
		how = "full scans"
		if rows, err = compareTables(ctx, src, dst, mv.Schema, tables); err != nil {
			return err
		}
	}
	mo.log.Info("checked", "id", mv.ID, "tables", len(tables), "rows", rows, "from", how, "took", time.Since(t0))
	mv.Rows = rows
	mo.progress(mv.MoveRecord, MoveProgress{Phase: PhaseVerified, Tables: len(tables), Rows: rows, Lag: 0})
	return setPhaseBy(mv.MoveRecord, PhaseVerified, func(s catalog.Step) error { return catalog.JournalCopied(ctx, mo.catalog, s, rows) })
}

// tableSum is a table's row count and order-independent checksum.
type tableSum struct {
	rows int64
	sum  string
}

// checksum reads a table's count and the sum of a 64-bit hash of every
// row: hash_record_extended over the row's columns, each hashed by its
// type's own hash function (cheap: no conversion to text). A table with a
// column type that has no hash function (json, point) or whose values are
// OIDs (an enum, regclass: hashesAsText) is hashed over its rows' text
// instead, with the settings that shape that text fixed.
func checksum(ctx context.Context, db *pgxpool.Pool, table string) (tableSum, error) {
	text, err := hashesAsText(ctx, db, table)
	if err != nil {
		return tableSum{}, err
	}
	s, err := scanTable(ctx, db, table, text)
	return s.tableSum, err
}

// compareTables compares every table's count and checksum on both hosts,
// the hosts and tables in parallel, and returns the rows counted.
func compareTables(ctx context.Context, src, dst *pgxpool.Pool, schema string, tables []string) (int64, error) {
	sums := make([][2]tableSum, len(tables))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, t := range tables {
		qt := pgx.Identifier{schema, t}.Sanitize()
		for side, db := range []*pgxpool.Pool{src, dst} {
			g.Go(func() error {
				s, err := checksum(gctx, db, qt)
				if err != nil {
					return fmt.Errorf("checksum %s: %w", qt, err)
				}
				sums[i][side] = s
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return sameSums(tables, sums)
}

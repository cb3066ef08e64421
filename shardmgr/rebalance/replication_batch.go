package rebalance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// batch is the online moves of one source to one target that share a
// publication, a slot (whose snapshot they are copied at) and a
// subscription, named name: the target's server starts one worker for
// them, once. A move's own journal, fence and flip stay its own.
type batch struct {
	name  string
	moves []*move
	rows  []int64 // copied, per move
}

// copyBatch publishes the tables of b's moves on the source (with each
// move's mark table), starts logging their changes there
// (cutover_delta.go), creates the slot with its snapshot, copies every
// move's rows at that snapshot and starts logging on the target. A batch
// that fails takes its moves' change logs away.
func (mo *mover) copyBatch(ctx context.Context, b *batch) (err error) {
	first := b.moves[0]
	src := first.src
	if err := mo.checkConnInfoPassword(ctx, first.dst, first.To); err != nil {
		return err
	}
	var names []string
	b.rows = make([]int64, len(b.moves))
	tables := make([][]string, len(b.moves))
	for i, mv := range b.moves {
		var err error
		if tables[i], err = rowTables(ctx, src, mv.Schema); err != nil {
			return fmt.Errorf("source %s: %w", mv.From, err)
		}
		for _, db := range []*pgxpool.Pool{mv.src, mv.dst} {
			if err := createMarkTable(ctx, db, mv.MoveRecord); err != nil {
				return fmt.Errorf("mark table: %w", err)
			}
		}
		names = append(names, markTable(mv.MoveRecord))
		for _, t := range tables[i] {
			names = append(names, pgx.Identifier{mv.Schema, t}.Sanitize())
		}
	}
	defer func() {
		if err != nil {
			for _, mv := range b.moves {
				mo.dropDeltas(ctx, mv.MoveRecord)
			}
		}
	}()
	text := make([]map[string]bool, len(b.moves))
	for i, mv := range b.moves {
		if text[i], err = mo.logSource(ctx, mv, tables[i]); err != nil {
			return err
		}
	}
	name := pgx.Identifier{b.name}.Sanitize()
	if _, err := src.Exec(ctx, `DROP PUBLICATION IF EXISTS `+name); err != nil {
		return fmt.Errorf("source %s: %w", first.From, err)
	}
	if _, err := src.Exec(ctx, `CREATE PUBLICATION `+name+` FOR TABLE `+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("source %s: create publication: %w", first.From, err)
	}
	// A slot left by an earlier attempt goes: its snapshot went with that
	// attempt's connection.
	if err := dropSlot(ctx, src, b.name); err != nil {
		return fmt.Errorf("source %s: %w", first.From, err)
	}
	slot, err := createSnapshotSlot(ctx, mo.c, first.From, b.name, mo.opts.keepServerTimeouts)
	if err != nil {
		return fmt.Errorf("source %s: %w", first.From, err)
	}
	defer slot.close(ctx)
	snapshot, err := slot.pgSnapshot(ctx, src)
	if err != nil {
		return fmt.Errorf("source %s: %w", first.From, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyTables)
	for i, mv := range b.moves {
		g.Go(func() error {
			counts, err := mo.copyAtSnapshot(gctx, mv, slot, tables[i])
			if err != nil {
				return err
			}
			for _, n := range counts {
				b.rows[i] += n
			}
			ps, err := mo.logTarget(gctx, mv, tables[i], text[i], snapshot, counts)
			if err != nil {
				return err
			}
			mo.keepCopied(mv.ID, ps)
			return nil
		})
	}
	return g.Wait()
}

// subscribe creates the subscriptions of batches, all to target to, in
// one transaction: the target's launcher starts their workers in one
// pass, so its pause between starts (wal_retrieve_retry_interval) is paid
// once. Each starts from its slot, with copy_data = false.
func (mo *mover) subscribe(ctx context.Context, dst *pgxpool.Pool, to string, batches []*batch) error {
	err := pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if err := quietStatementLog(ctx, tx); err != nil {
			mo.log.Warn("the mover's role may not keep CREATE SUBSCRIPTION out of the target's server log: should it fail, the log shows the source's password",
				"host", to, "err", err)
		}
		for _, b := range batches {
			h, _ := mo.cfg.Host(b.moves[0].From)
			conninfo, err := mo.connInfo(h)
			if err != nil {
				return fmt.Errorf("source %s: %w", h.Name, err)
			}
			name := pgx.Identifier{b.name}.Sanitize()
			if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s WITH (slot_name = %s, create_slot = false, copy_data = false)`,
				name, pg.QuoteLiteral(conninfo), name, pg.QuoteLiteral(b.name))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("target %s: create subscription: %w", to, err)
	}
	return nil
}

// recordCopied journals phase copy for every move of b.
func (b *batch) recordCopied(ctx context.Context, mo *mover) error {
	for i, mv := range b.moves {
		mv.Rows = b.rows[i]
		if err := setPhaseBy(mv.MoveRecord, PhaseCopy, func(s catalog.Step) error { return catalog.JournalCopied(ctx, mo.catalog, s, mv.Rows) }); err != nil {
			return err
		}
	}
	return nil
}

// replNameOf is the name of the publication, slot and subscription that
// carry rec's changes: those of its batch, found by its mark table in the
// target's subscription, else in the source's publication; else its own
// (rec.replName). Either host may be nil (unreachable).
func replNameOf(ctx context.Context, src, dst shardmgr.Querier, rec *MoveRecord) (string, error) {
	var name string
	if dst != nil {
		err := dst.QueryRow(ctx, `SELECT s.subname FROM pg_catalog.pg_subscription_rel r JOIN pg_catalog.pg_subscription s ON s.oid = r.srsubid
			WHERE r.srrelid = pg_catalog.to_regclass($1)`, markTable(rec)).Scan(&name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("target %s: %w", rec.To, err)
		}
	}
	if src != nil {
		err := src.QueryRow(ctx, `SELECT pubname FROM pg_catalog.pg_publication_tables WHERE schemaname = 'shardid' AND tablename = $1`, rec.replName).Scan(&name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("source %s: %w", rec.From, err)
		}
	}
	return rec.replName, nil
}

// dropBatch drops a batch's subscription, slot and publication.
func dropBatch(ctx context.Context, src, dst pg.Execer, name string) error {
	if err := dropSubscription(ctx, dst, name); err != nil {
		return err
	}
	if err := dropSlot(ctx, src, name); err != nil {
		return err
	}
	_, err := src.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{name}.Sanitize())
	return err
}

// batchLockClass is the first key of the session advisory lock, on a
// batch's source, that a move holds while it leaves the batch: 'shbt'.
const batchLockClass int32 = 0x73686274

// batchLockTimeout bounds the wait for another move of the batch to leave
// it (a few statements, and its slot's walsender to end).
const batchLockTimeout = 2 * time.Minute

// lockBatch takes batch repl's lock on a connection of the source's pool
// and returns the function that releases it.
func lockBatch(ctx context.Context, src *pgxpool.Pool, repl string) (func(), error) {
	conn, err := src.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, batchLockTimeout)
	defer cancel()
	if _, err := conn.Exec(wctx, `SELECT pg_catalog.pg_advisory_lock($1, pg_catalog.hashtext($2))`, batchLockClass, repl); err != nil {
		conn.Release()
		if wctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("another move of batch %s did not leave it within %s: %w", repl, batchLockTimeout, err)
		}
		return nil, err
	}
	return func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(c, `SELECT pg_catalog.pg_advisory_unlock($1, pg_catalog.hashtext($2))`, batchLockClass, repl); err != nil {
			conn.Conn().Close(c) // the lock goes with the session
		}
		conn.Release()
	}, nil
}

// leaveBatch takes rec's tables and mark table out of its batch's
// publication repl and reports whether none are left. It reads the
// publication's members themselves (pg_publication_rel), not what
// pg_publication_tables shows of them: that view lists a published
// partitioned table as its leaves, which are no members to drop.
func leaveBatch(ctx context.Context, src *pgxpool.Pool, rec *MoveRecord, repl string) (last bool, err error) {
	rows, err := src.Query(ctx, `SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)
		FROM pg_catalog.pg_publication_rel pr JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid
		JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE p.pubname = $1 AND (n.nspname = $2 OR (n.nspname = 'shardid' AND c.relname = $3))`, repl, rec.Schema, rec.replName)
	if err != nil {
		return false, err
	}
	mine, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, err
	}
	if len(mine) > 0 {
		if _, err := src.Exec(ctx, `ALTER PUBLICATION `+pgx.Identifier{repl}.Sanitize()+` DROP TABLE `+strings.Join(mine, ", ")); err != nil {
			return false, err
		}
	}
	var left bool
	err = src.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_publication_tables WHERE pubname = $1)`, repl).Scan(&left)
	return !left, err
}

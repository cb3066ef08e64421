package rebalance

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// AbortResult is what AbortMove rolled back.
type AbortResult struct {
	MoveRef
	// Phase is the phase the move had reached.
	Phase Phase `json:"phase"`
}

// AbortMove rolls back the unfinished moves of the given shards (nil:
// every unfinished move): the target's copy, subscription, replication
// slot and publication are dropped, the source's fence lifted, its
// counter given back its range, and the catalog's state set back to
// active. A source that does not answer (restarting) is waited for, at
// most a minute at each step on it. A move that already flipped the map
// is ErrMoveFlipped; with no unfinished move it is ErrNoMove.
func AbortMove(ctx context.Context, c *cluster.Cluster, shards []int) ([]AbortResult, error) {
	mo, err := newMover(ctx, c, MoveOptions{})
	if err != nil {
		return nil, err
	}
	open, err := readMoves(ctx, mo.catalog, catalog.OpenMoves)
	if err != nil {
		return nil, err
	}
	if shards != nil {
		want := map[int]bool{}
		for _, s := range shards {
			want[s] = true
		}
		var sel []*MoveRecord
		for _, rec := range open {
			if want[rec.Shard] {
				sel = append(sel, rec)
				delete(want, rec.Shard)
			}
		}
		if len(want) > 0 {
			var ids []int
			for s := range want {
				ids = append(ids, s)
			}
			sort.Ints(ids)
			return nil, fmt.Errorf("shards %v: %w", ids, ErrNoMove)
		}
		open = sel
	}
	if len(open) == 0 {
		return nil, ErrNoMove
	}
	out := []AbortResult{}
	for _, rec := range open {
		if rec.Phase.PastNoReturn() {
			return out, &shardmgr.ShardError{Shard: rec.Shard, Host: rec.To, Err: fmt.Errorf("move %d: %w", rec.ID, ErrMoveFlipped)}
		}
		if err := mo.abort(ctx, rec); err != nil {
			return out, &shardmgr.ShardError{Shard: rec.Shard, Err: fmt.Errorf("abort move %d (%s -> %s): %w", rec.ID, rec.From, rec.To, err)}
		}
		out = append(out, AbortResult{MoveRef: rec.MoveRef, Phase: rec.Phase})
	}
	return out, nil
}

func (mo *mover) abort(ctx context.Context, rec *MoveRecord) error {
	unlock, err := mo.lockMove(ctx, rec)
	if err != nil {
		return err
	}
	defer unlock()
	fresh, err := readMoves(ctx, mo.catalog, `id = $1`, rec.ID)
	if err != nil {
		return err
	}
	if *rec = *fresh[0]; !rec.Phase.Open() || rec.Phase.PastNoReturn() {
		return fmt.Errorf("move %d is now in phase %s", rec.ID, rec.Phase)
	}
	// A source that does not answer (restarting) is waited for, at most
	// giveBackRetry, at each step on it: the shard refuses writes until
	// it is given back.
	mv := &move{MoveRecord: rec}
	if err := mo.whileSourceRestarts(ctx, mv, func() error { return mo.open(ctx, mv) }); err != nil {
		return err
	}
	src, dst := mv.src, mv.dst
	if err := mo.whileSourceRestarts(ctx, mv, func() error {
		if err := src.Ping(ctx); err != nil {
			return fmt.Errorf("source %s: %w", rec.From, err)
		}
		return nil
	}); err != nil {
		return err
	}
	_, ours, err := ownTarget(ctx, dst, rec)
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	// This move's copy, opened, may hold writes acknowledged there (a
	// move of an older shardid opened it before flipping the catalog): it
	// is never dropped; the move is finished instead.
	if ours {
		if opened, err := fence.Opened(ctx, dst, rec.Schema); err != nil {
			return fmt.Errorf("target %s: %w", rec.To, err)
		} else if opened {
			return fmt.Errorf("%w on %s (schema %s)", ErrTargetOpen, rec.To, rec.Schema)
		}
	}
	// The change log's triggers first, the gentle way: the source may be
	// serving.
	mo.dropDeltas(ctx, rec)
	if err := mo.whileSourceRestarts(ctx, mv, func() error { return dropReplication(ctx, src, dst, rec) }); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if ours {
			if _, err := tx.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{rec.Schema}.Sanitize()+` CASCADE`); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM shardid.local_shards WHERE shard = $1 AND state = 'fenced'`, rec.Shard)
		return err
	})
	if err != nil {
		return fmt.Errorf("target %s: drop the copy: %w", rec.To, err)
	}
	if err := mo.whileSourceRestarts(ctx, mv, func() error { return mo.unfenceSourceHost(ctx, src, rec) }); err != nil {
		return fmt.Errorf("source %s: lift the fence: %w", rec.From, err)
	}
	gen, err := catalog.Change(ctx, mo.catalog, 0, fmt.Sprintf("abort move %d: shard %d stays on %s", rec.ID, rec.Shard, rec.From), func(tx pgx.Tx, gen int64) error {
		if err := catalog.GiveBackShard(ctx, tx, gen, rec.key()); err != nil {
			return err
		}
		// A fenced move's refused window ends here, with the catalog's
		// word that the shard takes writes again.
		return catalog.JournalAborted(ctx, tx, rec.ID)
	})
	if err != nil {
		return err
	}
	return mo.whileSourceRestarts(ctx, mv, func() error { return recordGivenBack(ctx, src, rec, gen) })
}

// recordGivenBack records on the source, after the catalog committed at
// gen that the shard stays there, that its live copy is there as of gen.
func recordGivenBack(ctx context.Context, src *pgxpool.Pool, rec *MoveRecord, gen int64) error {
	if err := shardschema.RecordLocalShard(ctx, src, rec.Shard, rec.Schema, string(shardmgr.StateActive), gen); err != nil {
		return fmt.Errorf("source %s: record the shard: %w", rec.From, err)
	}
	return nil
}

// giveBackWait bounds the wait of a source's give-back for the catalog's
// cluster row: longer than the flip's, since the shard's writes stay
// refused by the routers until the catalog says active again.
const giveBackWait = 30 * time.Second

// giveBackRetry bounds how long a give-back waits for a source that does
// not answer (pg.NotAnswering: a source restarting, the very failure that
// often made the move give up), trying again every giveBackPause: the
// shard refuses writes until it is given back, and a move that gave up at
// once left it so until the next run.
const (
	giveBackRetry = time.Minute
	giveBackPause = 250 * time.Millisecond
)

// unfenceSource gives a fenced source back: the journal at the phase
// before the fence, then fence down and counter running, then the
// catalog's state active. The journal goes first, so that a move run again
// fences and checks the copy again rather than flip a source that took
// writes; the catalog last, so that routers send writes only to a source
// that takes them. A source that does not answer is waited for, at most
// giveBackRetry.
func (mo *mover) unfenceSource(ctx context.Context, mv *move) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackRetry+time.Minute)
	defer cancel()
	if err := mo.whileSourceRestarts(ctx, mv, func() error { return mo.open(ctx, mv) }); err != nil {
		return err
	}
	back, err := backTo(mv.Mode, mv.Phase)
	if err != nil {
		return err
	}
	// fenced_at stays: the window goes on until the catalog says active.
	if err := phaseErr(mv.MoveRecord, back, catalog.JournalPhaseBack(ctx, mo.catalog, catalog.Step{ID: mv.ID, From: mv.Phase, To: back})); err != nil {
		return err
	}
	mv.Phase = back
	src := mv.src
	if err := mo.whileSourceRestarts(ctx, mv, func() error { return mo.unfenceSourceHost(ctx, src, mv.MoveRecord) }); err != nil {
		return err
	}
	mo.dropDeltas(ctx, mv.MoveRecord)
	gen, err := catalog.ChangeWithin(ctx, mo.catalog, 0, giveBackWait, fmt.Sprintf("move %d: shard %d back to active on %s", mv.ID, mv.Shard, mv.From), func(tx pgx.Tx, gen int64) error {
		if err := catalog.GiveBackShard(ctx, tx, gen, mv.key()); err != nil {
			return err
		}
		// The refused window ends with the catalog's word.
		return endRefused(ctx, tx, mv.MoveRecord)
	})
	if err != nil {
		return err
	}
	return mo.whileSourceRestarts(ctx, mv, func() error { return recordGivenBack(ctx, src, mv.MoveRecord, gen) })
}

// whileSourceRestarts runs fn, again while its error says that a host of
// mv does not answer (pg.NotAnswering), for at most giveBackRetry; the
// error that ends the wait names what it waited for.
func (mo *mover) whileSourceRestarts(ctx context.Context, mv *move, fn func() error) error {
	return mo.whileNotAnswering(ctx, mv, mv.From, giveBackWaitsMsg, fmt.Sprintf("to give shard %d back", mv.Shard), fn)
}

// whileNotAnswering runs fn, again while its error says that a server
// does not answer (pg.NotAnswering), for at most giveBackRetry, logging
// msg once when it starts to wait for host; the error that ends the wait
// names host and why it waited (purpose).
func (mo *mover) whileNotAnswering(ctx context.Context, mv *move, host, msg, purpose string, fn func() error) error {
	bound := giveBackRetry
	if mo.opts.giveBackRetry > 0 {
		bound = mo.opts.giveBackRetry
	}
	deadline := time.Now().Add(bound)
	logged := false
	for {
		err := fn()
		if err == nil || !pg.NotAnswering(err) || ctx.Err() != nil {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("waited %s for %s to answer, %s: %w", bound, host, purpose, err)
		}
		if !logged {
			logged = true
			mo.log.Warn(msg, "id", mv.ID, "shard", mv.Shard, "host", host, "for", bound, "err", pg.OneLine(err))
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(giveBackPause):
		}
	}
}

// giveBackWaitsMsg is what the mover logs when a give-back starts to wait
// for a source that does not answer.
const giveBackWaitsMsg = "the source does not answer; the give-back tries again until it does"

// openWaitsMsg is what the mover logs when a flipped move starts to wait
// for a target (the shard's new home) that does not answer, to open it.
const openWaitsMsg = "the target does not answer; opening it tries again until it does"

// dropMoveTriggers drops the fence's and the change log's triggers from a
// host's copy of the shard once no VACUUM works on its tables: DDL that
// takes the tables' locks, each try holding writers back for at most
// LockTimeout. Both are open by then (their functions let writes through
// and log nothing), so the fence's go a table at a time (fence.RemoveOpen:
// at once they would deadlock with writes made straight into a partition).
// A wait that runs out names the sessions holding locks on the shard's
// tables (a long read, a pg_dump).
func (mo *mover) dropMoveTriggers(ctx context.Context, db *pgxpool.Pool, rec *MoveRecord) error {
	start := time.Now()
	err := pg.WithTablesIdle(ctx, db, rec.Schema, func() error {
		err := pg.WithLockRetry(ctx, db, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error { return dropDelta(ctx, tx, rec) })
		if err != nil {
			return err
		}
		return fence.RemoveOpen(ctx, db, rec.Schema, mo.opts.LockTimeout)
	})
	if pg.IsLockTimeout(err) {
		return pg.LockWaitFailed(ctx, fmt.Sprintf("the locks on %s's tables to drop the move's triggers (each try waits %s)", rec.Schema, mo.opts.LockTimeout), start,
			func(ctx context.Context) ([]pg.LockHolder, error) { return pg.SchemaLockHolders(ctx, db, rec.Schema) })
	}
	return err
}

func (mo *mover) unfenceSourceHost(ctx context.Context, src *pgxpool.Pool, rec *MoveRecord) error {
	var has bool
	if err := src.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, pgx.Identifier{rec.Schema}.Sanitize()).Scan(&has); err != nil || !has {
		return err
	}
	// Writes first, by function swaps and the counter's range (no table
	// lock); then the triggers go, as far as the tables let them.
	err := pg.WithLockRetry(ctx, src, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := muteDelta(ctx, tx, rec); err != nil {
			return err
		}
		if err := fence.Func(ctx, tx, rec.Schema, false); err != nil {
			return err
		}
		if rec.counterMax != nil {
			return fence.UnclampCounter(ctx, tx, rec.Schema, *rec.counterMax)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := mo.dropMoveTriggers(ctx, src, rec); err != nil {
		mo.log.Warn("the source takes writes again; its open fence and change-log triggers stay until the move is run or aborted again", "id", rec.ID, "host", rec.From, "err", err)
	}
	return nil
}

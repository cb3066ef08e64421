package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// The move journal, shardid.moves, is written here only. Package
// rebalance, which runs moves, records each move's phases through the
// functions below; the catalog repair (package repair) closes, finishes
// and adds moves through them inside its change. The journal's writes
// that go with a change of the map (the fence, the flip, the give-back,
// an abort) run inside that catalog change (moves.go); the others are
// single statements that bump no generation.

// ErrPhaseChanged is a journal write that found the move no longer in
// the phase it expected (another manager moved it on, or aborted it).
var ErrPhaseChanged = errors.New("the move is no longer in the phase expected")

// ErrMoveNotOpen is a journal write that found the move finished.
var ErrMoveNotOpen = errors.New("the move is no longer open")

// NewMove is a move as JournalMove records it, in phase planned.
type NewMove struct {
	// Shard is the shard the move moves.
	Shard int
	// From is the source host (the shard's home), To the target host.
	From, To string
	// Mode is how the move copies: "online" or "offline"
	// (rebalance.MoveMode, auto already resolved).
	Mode string
	// Schema is the shard's schema, the same on both hosts.
	Schema string
	// Bytes is the shard's size on the source when the move was planned.
	Bytes int64
	// Keep is how long cleanup keeps the source's retired copy after the
	// flip; zero or less: it is dropped at once (the journal's -1).
	Keep time.Duration
}

// JournalMove records move m in phase planned, inside the transaction
// that plans it, and returns its journal id. The move gets its
// replication objects' name (shardid_m<id>_<random>: slots are per
// server, and several clusters may share one) and a random token that
// marks the target schema it creates. It fails with a unique violation
// (pg.IsUniqueViolation) when the shard already has an open move.
func JournalMove(ctx context.Context, tx pgx.Tx, m NewMove) (int64, error) {
	var b [4]byte
	var token [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	if _, err := rand.Read(token[:]); err != nil {
		return 0, err
	}
	keep := int64(-1) // the journal's mark for "drop at once"
	if m.Keep > 0 {
		keep = m.Keep.Milliseconds()
	}
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO shardid.moves (shard, from_host, to_host, mode, repl_name, schema_name, bytes, keep_ms, target_token)
		VALUES ($1, $2, $3, $4, 'pending-' || gen_random_uuid(), $5, $6, $7, $8) RETURNING id`,
		m.Shard, m.From, m.To, m.Mode, m.Schema, m.Bytes, keep, hex.EncodeToString(token[:])).Scan(&id)
	if err != nil {
		return 0, err
	}
	repl := fmt.Sprintf("shardid_m%d_%s", id, hex.EncodeToString(b[:]))
	if _, err := tx.Exec(ctx, `UPDATE shardid.moves SET repl_name = $2 WHERE id = $1`, id, repl); err != nil {
		return 0, err
	}
	return id, nil
}

// Step is a move's journal row passing from phase From to phase To.
// The journal functions that take one write only while the row is still
// at From, and return ErrPhaseChanged when it is not.
type Step struct {
	// ID is the move's journal id.
	ID int64
	// From is the phase the caller last read, To the one it completed.
	From, To Phase
}

// JournalPhase records step s: phase s.To completed, the move's error
// cleared (it was an earlier step's).
func JournalPhase(ctx context.Context, q pg.Execer, s Step) error {
	return journalStep(ctx, q, s, "")
}

// JournalCopied records step s with the rows copied: the copy phase of
// an offline move or of an online move's batch, and phase verified.
func JournalCopied(ctx context.Context, q pg.Execer, s Step, rows int64) error {
	return journalStep(ctx, q, s, "rows_copied = $4", rows)
}

// SchemaBuilt is what the schema phase records of the target's copy.
type SchemaBuilt struct {
	// Version is the shard's migration version, the source's.
	Version int
	// CounterMax is the source's counter range, which the target's
	// counter gets once it is opened; a range recorded before is kept.
	CounterMax int64
	// Bytes is the shard's size on the source.
	Bytes int64
}

// JournalSchema records step s (to phase schema) with what b says of the
// target's copy.
func JournalSchema(ctx context.Context, q pg.Execer, s Step, b SchemaBuilt) error {
	return journalStep(ctx, q, s, "version = $4, counter_max = coalesce(counter_max, $5), bytes = $6", b.Version, b.CounterMax, b.Bytes)
}

// JournalCleaned records step s (to phase cleaned): the move finished,
// the source's copy retired as schema retired and kept keep from now
// (below zero: the move keeps none, and retired is dropped already).
func JournalCleaned(ctx context.Context, q pg.Execer, s Step, retired string, keep time.Duration) error {
	set := `retired_schema = $4, finished_at = pg_catalog.clock_timestamp(), keep_until = pg_catalog.clock_timestamp() + $5 * interval '1 millisecond'`
	if keep < 0 {
		set += `, retired_dropped_at = pg_catalog.clock_timestamp()`
	}
	return journalStep(ctx, q, s, set, retired, max(keep.Milliseconds(), 0))
}

// journalStep is step s with the further assignments set (their
// arguments $4 on: args) in the same update.
func journalStep(ctx context.Context, q pg.Execer, s Step, set string, args ...any) error {
	sql := `UPDATE shardid.moves SET phase = $2, error = '', updated_at = pg_catalog.clock_timestamp()`
	if set != "" {
		sql += ", " + set
	}
	sql += ` WHERE id = $1 AND phase = $3`
	tag, err := q.Exec(ctx, sql, append([]any{s.ID, string(s.To), string(s.From)}, args...)...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return ErrPhaseChanged
	}
	return nil
}

// JournalPhaseBack records that a move given back before its flip is at
// phase s.To again, the phase before its fence, from s.From (or at s.To
// already: a give-back run again). The move's error stays, and so does
// its refused window: it ends with the catalog's word that the shard is
// active (GiveBackShard, JournalRefusedEnd).
func JournalPhaseBack(ctx context.Context, q pg.Execer, s Step) error {
	tag, err := q.Exec(ctx, `UPDATE shardid.moves SET phase = $2, updated_at = pg_catalog.clock_timestamp()
		WHERE id = $1 AND phase IN ($2, $3)`, s.ID, string(s.To), string(s.From))
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return ErrPhaseChanged
	}
	return nil
}

// JournalRows records the rows a move's copy has copied so far, while it
// copies (its progress; the phase stays).
func JournalRows(ctx context.Context, q pg.Execer, id, rows int64) error {
	_, err := q.Exec(ctx, `UPDATE shardid.moves SET rows_copied = $2, updated_at = pg_catalog.clock_timestamp() WHERE id = $1`, id, rows)
	return err
}

// JournalError records why move id stopped (one line).
func JournalError(ctx context.Context, q pg.Execer, id int64, why string) error {
	_, err := q.Exec(ctx, `UPDATE shardid.moves SET error = $2, updated_at = pg_catalog.clock_timestamp() WHERE id = $1`, id, why)
	return err
}

// JournalRetiredDropped records that cleanup dropped move id's retired
// copy from its source.
func JournalRetiredDropped(ctx context.Context, q pg.Execer, id int64) error {
	_, err := q.Exec(ctx, `UPDATE shardid.moves SET retired_dropped_at = pg_catalog.clock_timestamp() WHERE id = $1`, id)
	return err
}

// The journal's refused window: fenced_at is the start of the part of
// the window not yet counted in refused_ms (set by the fence, NULL while
// the shard takes writes), and refused_ms what has been counted, from the
// fence to the target's opening or to the source's give-back, adding up
// every fence of a move that was given back and fenced again. Whatever
// happens between the fence and its end (a failed catch-up, a flip that
// waits for the catalog, a crash and a later run) is inside the window.
// FenceShard starts it; FlipShard counts it on; JournalRefusedEnd and
// JournalAborted end it.

// countRefused is the SET clause that adds the uncounted part of the
// window to refused_ms and, with more, starts the next uncounted part now
// (the window goes on), else ends it.
func countRefused(more bool) string {
	next := "NULL"
	if more {
		next = "CASE WHEN fenced_at IS NOT NULL THEN pg_catalog.clock_timestamp() END"
	}
	return `refused_ms = CASE WHEN fenced_at IS NULL THEN refused_ms
			ELSE coalesce(refused_ms, 0) + (extract(epoch FROM pg_catalog.clock_timestamp() - fenced_at) * 1000)::bigint END,
		fenced_at = ` + next
}

// JournalRefusedEnd ends move id's refused window (q: the catalog once
// the target takes writes, or the catalog change that gives the source
// back) and returns the milliseconds counted in all (nil: none yet). A
// window not ended is counted on by the next end.
func JournalRefusedEnd(ctx context.Context, q pg.Querier, id int64) (*int64, error) {
	var refused *int64
	err := q.QueryRow(ctx, `UPDATE shardid.moves SET `+countRefused(false)+` WHERE id = $1 RETURNING refused_ms`, id).Scan(&refused)
	return refused, err
}

// JournalAborted records, inside the catalog change that gives the shard
// back (GiveBackShard), that move id is rolled back: phase aborted,
// finished, its refused window ended.
func JournalAborted(ctx context.Context, tx pgx.Tx, id int64) error {
	_, err := tx.Exec(ctx, `UPDATE shardid.moves SET phase = $2, finished_at = pg_catalog.clock_timestamp(),
		updated_at = pg_catalog.clock_timestamp(), `+countRefused(false)+` WHERE id = $1`, id, string(PhaseAborted))
	return err
}

// JournalClosed records, inside the catalog repair's change, that the
// open moves among ids are over (phase aborted, why their error): the
// hosts' records place their shards.
func JournalClosed(ctx context.Context, tx pgx.Tx, ids []int64, why string) error {
	_, err := tx.Exec(ctx, `UPDATE shardid.moves SET phase = $2, error = $3, finished_at = pg_catalog.clock_timestamp(),
		updated_at = pg_catalog.clock_timestamp() WHERE id = ANY ($1) AND `+OpenMoves,
		ids, string(PhaseAborted), why)
	return err
}

// FinishedMove is an open move that the catalog repair journals as
// finished (cleaned): its shard lives on its target.
type FinishedMove struct {
	// ID is the move's journal id.
	ID int64
	// Retired is the retired copy it left on its source; "" when none.
	Retired string
	// FlipGeneration is the flip's generation, recorded where the journal
	// has none.
	FlipGeneration int64
	// Why goes into the move's error column.
	Why string
}

// JournalFinished records f, inside the catalog repair's change: phase
// cleaned, the keep period of its retired copy (the move's own) running
// from now. ErrMoveNotOpen when the move is finished already.
func JournalFinished(ctx context.Context, tx pgx.Tx, f FinishedMove) error {
	var retired *string
	if f.Retired != "" {
		retired = &f.Retired
	}
	tag, err := tx.Exec(ctx, `UPDATE shardid.moves SET phase = $2, retired_schema = $3, flip_generation = coalesce(flip_generation, $4),
			finished_at = pg_catalog.clock_timestamp(), updated_at = pg_catalog.clock_timestamp(),
			keep_until = pg_catalog.clock_timestamp() + GREATEST(keep_ms, 0) * interval '1 millisecond', error = $5
		WHERE id = $1 AND `+OpenMoves,
		f.ID, string(PhaseCleaned), retired, f.FlipGeneration, f.Why)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrMoveNotOpen
	}
	return nil
}

package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// MoveMode is how a move copies a shard.
type MoveMode string

// Move modes.
const (
	// MoveOnline copies with logical replication while the shard keeps
	// taking writes; writes are refused only for the cut-over.
	MoveOnline MoveMode = "online"
	// MoveOffline fences the shard, copies it with COPY and flips: writes
	// are refused for the whole copy. For hosts without logical
	// replication, or tables without a primary key.
	MoveOffline MoveMode = "offline"
	// MoveAuto moves online where the hosts and the shard's tables allow
	// it, and offline where they do not (the preflight says why). The
	// journal records the mode chosen.
	MoveAuto MoveMode = "auto"
)

// Phase is the last step a move completed, as the journal records it.
// The names are shared with the catalog package, which reads the journal
// (Open: work left; PastNoReturn: at or past PointOfNoReturn).
type Phase = catalog.Phase

// Phases of a move. An online move goes planned, schema, copy, catchup,
// fenced, verified, flipped, cleaned; an offline one planned, schema,
// fenced, copy, verified, flipped, cleaned. Aborted ends a move that was
// rolled back before its flip. Each is described in the catalog package.
const (
	PhasePlanned  = catalog.PhasePlanned
	PhaseSchema   = catalog.PhaseSchema
	PhaseCopy     = catalog.PhaseCopy
	PhaseCatchup  = catalog.PhaseCatchup
	PhaseFenced   = catalog.PhaseFenced
	PhaseVerified = catalog.PhaseVerified
	PhaseFlipped  = catalog.PhaseFlipped
	PhaseCleaned  = catalog.PhaseCleaned
	PhaseAborted  = catalog.PhaseAborted
)

// PointOfNoReturn is the phase from which a move cannot be aborted, only
// finished: the flip, where the catalog names the target as the shard's
// home. The phase tables (move_phases.go) place it; abort, resume,
// cleanup, the preflight and verify ask Phase.PastNoReturn.
const PointOfNoReturn = catalog.PointOfNoReturn

// MoveRef names a move: its journal id, the shard and the two hosts.
type MoveRef struct {
	ID    int64  `json:"id"`
	Shard int    `json:"shard"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// MoveRecord is one row of the move journal.
type MoveRecord struct {
	MoveRef
	Mode     MoveMode   `json:"mode"`
	Phase    Phase      `json:"phase"`
	Schema   string     `json:"schema"`
	Retired  string     `json:"retired_schema,omitempty"`
	Version  int        `json:"version"`
	Bytes    int64      `json:"bytes"`
	Rows     int64      `json:"rows"`
	Error    string     `json:"error,omitempty"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	// RefusedMS is how long, in milliseconds, the move refused writes to
	// the shard: the windows from its fence to the target's opening or to
	// the give-back, added up. Nil (and absent from JSON) while none has
	// ended. Refused returns it as a duration.
	RefusedMS *int64 `json:"refused_ms,omitempty"`

	replName   string
	counterMax *int64
	keep       time.Duration
	keepUntil  *time.Time
	flipGen    *int64
	// targetToken marks the target schema the move created (never
	// shown): nil for a move journaled before catalog migration 017.
	targetToken *string
}

const moveColumns = `id, shard, from_host, to_host, mode, phase, schema_name, coalesce(retired_schema, ''), coalesce(version, 0),
	bytes, rows_copied, error, created_at, finished_at, repl_name, counter_max, refused_ms, keep_ms, keep_until, flip_generation, target_token`

func scanMove(row pgx.CollectableRow) (*MoveRecord, error) {
	var r MoveRecord
	var keepMS int64
	err := row.Scan(&r.ID, &r.Shard, &r.From, &r.To, &r.Mode, &r.Phase, &r.Schema, &r.Retired, &r.Version,
		&r.Bytes, &r.Rows, &r.Error, &r.Started, &r.Finished, &r.replName, &r.counterMax, &r.RefusedMS, &keepMS, &r.keepUntil, &r.flipGen, &r.targetToken)
	r.keep = time.Duration(keepMS) * time.Millisecond
	return &r, err
}

// key names the move's journal row and the map row it changes, for the
// catalog's writes.
func (r *MoveRecord) key() catalog.MoveKey {
	return catalog.MoveKey{ID: r.ID, Shard: r.Shard, From: r.From, To: r.To}
}

// readMoves reads journal rows matching where (a SQL condition on
// shardid.moves, with args), oldest first.
func readMoves(ctx context.Context, q shardmgr.Querier, where string, args ...any) ([]*MoveRecord, error) {
	rows, err := q.Query(ctx, `SELECT `+moveColumns+` FROM shardid.moves WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: read move journal: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanMove)
	if err != nil {
		return nil, fmt.Errorf("catalog: read move journal: %w", err)
	}
	return out, nil
}

// Moves reads the move journal of the cluster's catalog: every move when
// all is true, else those not yet finished.
func Moves(ctx context.Context, c *cluster.Cluster, all bool) ([]*MoveRecord, error) {
	pool, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	if all {
		return readMoves(ctx, pool, `true`)
	}
	return readMoves(ctx, pool, catalog.OpenMoves)
}

// journalMove records move m (its Mode resolved) in phase planned,
// inside the transaction that plans it. It fails with ErrMoveOpen when
// the shard already has an open move.
func journalMove(ctx context.Context, tx pgx.Tx, m catalog.NewMove) (*MoveRecord, error) {
	id, err := catalog.JournalMove(ctx, tx, m)
	if err != nil {
		if pg.IsUniqueViolation(err) {
			return nil, &shardmgr.ShardError{Shard: m.Shard, Err: ErrMoveOpen}
		}
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT `+moveColumns+` FROM shardid.moves WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectExactlyOneRow(rows, scanMove)
}

// setPhase records that move mv completed phase next (from its current
// phase), the phase alone.
func setPhase(ctx context.Context, q pg.Execer, mv *MoveRecord, next Phase) error {
	return setPhaseBy(mv, next, func(s catalog.Step) error { return catalog.JournalPhase(ctx, q, s) })
}

// setPhaseBy records that move mv completed phase next (from its current
// phase) through journal, the catalog's write of the step with what the
// phase records beside it (catalog.JournalCopied, JournalSchema,
// JournalCleaned).
func setPhaseBy(mv *MoveRecord, next Phase, journal func(catalog.Step) error) error {
	if err := phaseErr(mv, next, journal(catalog.Step{ID: mv.ID, From: mv.Phase, To: next})); err != nil {
		return err
	}
	mv.Phase = next
	mv.Error = "" // as the journal now says: the error was an earlier step's
	return nil
}

// phaseErr is err, the error of the journal's write of move mv's phase
// next, naming both.
func phaseErr(mv *MoveRecord, next Phase, err error) error {
	switch {
	case errors.Is(err, catalog.ErrPhaseChanged):
		return fmt.Errorf("move %d: journal phase %s: the move is no longer in phase %s (another manager?)", mv.ID, next, mv.Phase)
	case err != nil:
		return fmt.Errorf("move %d: journal phase %s: %w", mv.ID, next, err)
	}
	return nil
}

// recordError writes why a move stopped. Best effort.
func recordError(ctx context.Context, pool *pgxpool.Pool, mv *MoveRecord, err error) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	mv.Error = pg.OneLine(err)
	_ = catalog.JournalError(c, pool, mv.ID, mv.Error)
}

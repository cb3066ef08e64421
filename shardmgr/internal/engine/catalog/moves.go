package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
)

// The map's writes other than init's and SetShardState's: a move's fence,
// flip and give-back, and the catalog repair's placement. Each runs
// inside a catalog change (Change, ChangeWithin, ChangeAbove), whose tx
// and generation gen it takes, and writes what the journal records of
// the same step in that transaction.

// MoveKey names a move: its journal row and the map row it changes.
type MoveKey struct {
	// ID is the move's journal id.
	ID int64
	// Shard is the shard the move moves.
	Shard int
	// From is the source host, the shard's home until the flip; To is
	// the target host.
	From, To string
}

// FenceShard marks k's shard moving on k.From at gen (routers refuse its
// writes) and starts the move's refused window in the journal (kept
// where one is open already). It fails when the catalog no longer places
// the shard on From, active or moving.
func FenceShard(ctx context.Context, tx pgx.Tx, gen int64, k MoveKey) error {
	tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET state = 'moving', changed_generation = $3
		WHERE id = $1 AND host = $2 AND state IN ('active', 'moving')`, k.Shard, k.From, gen)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("shard %d is no longer active on %s in the catalog", k.Shard, k.From)
	}
	_, err = tx.Exec(ctx, `UPDATE shardid.moves SET fenced_at = coalesce(fenced_at, pg_catalog.clock_timestamp()) WHERE id = $1`, k.ID)
	return err
}

// FlipShard is a move's point of no return: it places k's shard on k.To,
// active, at gen, and records in the journal, in the same transaction,
// the phase PointOfNoReturn (from PhaseVerified) with the flip's
// generation, the refused window counted so far and going on (the
// target's opening ends it: JournalRefusedEnd). It returns the
// milliseconds counted. It fails when the catalog no longer has the
// shard moving from From, and with pgx.ErrNoRows when the journal's move
// is not at PhaseVerified.
func FlipShard(ctx context.Context, tx pgx.Tx, gen int64, k MoveKey) (refusedMS int64, err error) {
	tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET host = $2, state = 'active', changed_generation = $4
		WHERE id = $1 AND host = $3 AND state = 'moving'`, k.Shard, k.To, k.From, gen)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() != 1 {
		return 0, fmt.Errorf("shard %d is no longer moving from %s in the catalog", k.Shard, k.From)
	}
	err = tx.QueryRow(ctx, `UPDATE shardid.moves SET phase = $3, flip_generation = $2, error = '', updated_at = pg_catalog.clock_timestamp(),
			`+countRefused(true)+`
		WHERE id = $1 AND phase = $4 RETURNING coalesce(refused_ms, 0)`, k.ID, gen, string(PointOfNoReturn), string(PhaseVerified)).Scan(&refusedMS)
	return refusedMS, err
}

// GiveBackShard sets k's shard active again on k.From at gen, where the
// catalog has it moving there (a shard that is not is left as it is):
// the source takes its writes again. The caller ends the move's refused
// window in the same change (JournalRefusedEnd, or JournalAborted).
func GiveBackShard(ctx context.Context, tx pgx.Tx, gen int64, k MoveKey) error {
	_, err := tx.Exec(ctx, `UPDATE shardid.shards SET state = 'active', changed_generation = $3
		WHERE id = $1 AND host = $2 AND state = 'moving'`, k.Shard, k.From, gen)
	return err
}

// PlaceShard places shard s (its host, schema and state) at gen: the
// catalog repair's placement of a shard where the hosts' records say it
// lives.
func PlaceShard(ctx context.Context, tx pgx.Tx, gen int64, s shardmgr.Shard) error {
	_, err := tx.Exec(ctx, `UPDATE shardid.shards SET host = $2, schema_name = $3, state = $4, changed_generation = $5 WHERE id = $1`,
		s.ID, s.Host, s.Schema, string(s.State), gen)
	return err
}

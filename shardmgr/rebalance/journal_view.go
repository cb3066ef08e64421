package rebalance

import (
	"context"
	"time"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
)

// retainedMoves is the condition on shardid.moves ($1: PhaseCleaned) of a
// finished move whose old copy is still on its old host.
const retainedMoves = `phase = $1 AND retired_schema IS NOT NULL AND retired_dropped_at IS NULL`

// MoveList is the journal as `shardid rebalance status --json` prints it:
// {"moves":[...]}. The operator console serves the same value.
type MoveList struct {
	Moves []*MoveRecord `json:"moves"`
}

// Refused is how long the move refused writes to the shard, as the
// journal records it (see MoveResult.Refused); false while no refused
// window of the move has ended (before its flip or give-back).
func (r *MoveRecord) Refused() (time.Duration, bool) {
	if r.RefusedMS == nil {
		return 0, false
	}
	return time.Duration(*r.RefusedMS) * time.Millisecond, true
}

// RetainedCopies lists the old copies that finished moves keep, renamed
// and fenced, on their old hosts until Cleanup drops them, oldest move
// first. KeepUntil is zero for a copy recorded without a keep period.
// It reads the catalog only and changes nothing.
func RetainedCopies(ctx context.Context, c *cluster.Cluster) ([]KeptCopy, error) {
	pool, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	recs, err := readMoves(ctx, pool, retainedMoves, string(PhaseCleaned))
	if err != nil {
		return nil, err
	}
	out := make([]KeptCopy, 0, len(recs))
	for _, rec := range recs {
		k := KeptCopy{RetiredCopy: RetiredCopy{MoveID: rec.ID, Shard: rec.Shard, Host: rec.From, Schema: rec.Retired}}
		if rec.keepUntil != nil {
			k.KeepUntil = rec.keepUntil.UTC()
		}
		out = append(out, k)
	}
	return out, nil
}

// Phases lists the phases a move of mode passes, in order (the phase
// table of move_phases.go), so that a reader of the journal can say how
// far a move has come.
func Phases(mode MoveMode) []Phase { return steps(mode) }

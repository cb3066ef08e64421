package rebalance

import (
	"context"
	"fmt"
	"time"

	"github.com/shardid/shardid/shardmgr/cluster"
)

// Lag is how far an online move's target trails its source, read live on
// the source from the replication slot that carries the move's changes.
type Lag struct {
	// Slot is the replication slot (and publication, and subscription)
	// of the move's batch.
	Slot string `json:"slot"`
	// Bytes is the source's WAL written since what the target confirmed;
	// -1 when the target has confirmed nothing yet.
	Bytes int64 `json:"bytes"`
	// Seconds is the walsender's replay lag; nil when it cannot be read
	// (the subscription is not connected or has been idle, or the role
	// may not read pg_stat_replication's lag columns).
	Seconds *float64 `json:"seconds"`
}

// Replicating reports whether rec is an online move whose changes
// replication carries now: subscribed (phase copy recorded) and not yet
// fenced. Only such a move has a lag to read.
func (r *MoveRecord) Replicating() bool {
	return r.Mode == MoveOnline && (r.Phase == PhaseCopy || r.Phase == PhaseCatchup)
}

// MoveLag reads rec's replication lag on its source host, within timeout
// (the host may not answer). It changes nothing. A move that is not
// Replicating, or whose slot is gone, is an error.
func MoveLag(ctx context.Context, c *cluster.Cluster, rec *MoveRecord, timeout time.Duration) (*Lag, error) {
	if !rec.Replicating() {
		return nil, fmt.Errorf("move %d: not replicating (mode %s, phase %s)", rec.ID, rec.Mode, rec.Phase)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	src, err := c.HostPool(ctx, rec.From, cluster.Session{})
	if err != nil {
		return nil, err
	}
	// The batch's name is on the source's publication (or the move's
	// own): the target need not be asked.
	repl, err := replNameOf(ctx, src, nil, rec)
	if err != nil {
		return nil, err
	}
	lag, err := readSlotLag(ctx, src, repl)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("source %s: no answer within %s: %w", rec.From, timeout, err)
		}
		return nil, fmt.Errorf("source %s: %w", rec.From, err)
	}
	return lag, nil
}

package shardmgr

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Retries of a shard that is moving: the first after retryFirstPause, each
// next one twice as late, at most retryMaxPause apart.
const (
	retryFirstPause = 20 * time.Millisecond
	retryMaxPause   = 500 * time.Millisecond
)

// tx runs fn as txOnce does, retrying while the shard is moving for as
// long as WithRetryMoving allows.
func (r *Router) tx(ctx context.Context, id int, write bool, fn func(ctx context.Context, tx pgx.Tx, s Shard) error) error {
	return r.untilMoved(ctx, func() error { return r.txOnce(ctx, id, write, fn) })
}

// untilMoved runs once, and again while it fails with ErrShardMoving, for
// as long as WithRetryMoving allows.
func (r *Router) untilMoved(ctx context.Context, once func() error) error {
	err := once()
	wait := r.opts.retryMoving
	if wait <= 0 || !errors.Is(err, ErrShardMoving) {
		return err
	}
	deadline := time.Now().Add(wait)
	pause := retryFirstPause
	for errors.Is(err, ErrShardMoving) {
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, retryMaxPause)
		// The flip (or the move's undo) is in the catalog before the
		// shard takes writes again: read it now, not at the next refresh.
		r.reloadNow(ctx)
		err = once()
	}
	return err
}

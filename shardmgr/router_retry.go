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

// WithRetryMoving makes Tx, ReadTx, TxForID, ReadTxForID, Exec and
// QueryRow wait out a
// move's cut-over instead of returning ErrShardMoving at once: they run
// fn again, on the map reloaded from the catalog, for up to wait (and
// never past ctx), then return the last ErrShardMoving. An online move
// refuses writes for well under a second; a second or two covers it, an
// offline move's copy takes longer. Other errors, ErrShardReadOnly
// included, come back at once. Zero or negative (the default) does not
// retry.
//
// fn may run more than once: each failed run's transaction was rolled
// back, so fn must not have effects outside it (or must make them safe
// to repeat).
func WithRetryMoving(wait time.Duration) RouterOption {
	return func(o *routerOptions) { o.retryMoving = wait }
}

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

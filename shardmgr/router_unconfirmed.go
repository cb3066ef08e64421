package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// What a router does when its map may be out of date: the catalog is
// unreachable (it keeps serving from the last map it read, unconfirmed),
// or a host answered for a copy of a shard that has moved on (it says
// ErrShardMoving and reloads the map so the caller's retry goes to the new
// host).
//
// Words: an unconfirmed map is one the router could not check with the
// catalog lately; "stale" is kept for a catalog older than the hosts'
// records (ErrCatalogStale, router_hostcheck.go).

const (
	// DefaultMaxUnconfirmed is how long a router keeps taking writes on
	// a map it cannot confirm with the catalog (see WithMaxUnconfirmed).
	DefaultMaxUnconfirmed = 5 * time.Minute
	// DefaultMaxStaleness is DefaultMaxUnconfirmed.
	//
	// Deprecated: use DefaultMaxUnconfirmed.
	DefaultMaxStaleness = DefaultMaxUnconfirmed
	// catalogCheckTimeout bounds one refresh a call waits for, so that a
	// catalog that stopped answering (rather than refusing) delays a call
	// by at most this once before the router serves from its last map.
	catalogCheckTimeout = 5 * time.Second
	// The first retry after a failed refresh comes after about
	// firstBackoff; each failure doubles the wait up to maxBackoff, the
	// longest a router lags a catalog that came back.
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
	// movingRefresh is how often a router asks the catalog, at most,
	// while writes go to a shard its map holds as moving: the shard takes
	// writes again at the flip (or the move's give-back), which the router
	// learns no later than this after it, whatever its refresh interval.
	movingRefresh = 25 * time.Millisecond
)

// catalogHealth is what the router knows of its last refreshes. Guarded by
// Router.mu; checked (the last success) lives beside the map it confirms.
type catalogHealth struct {
	err               error         // last refresh's error; nil while the catalog answers
	since             time.Time     // first failure of the current outage
	backoff           time.Duration // current wait between retries
	nextTry           time.Time     // no retry before this
	warnedUnconfirmed bool          // the refusal of writes was logged in this outage
}

// UnconfirmedFor reports how long the router has been serving a map it could
// not confirm: zero while its last refresh succeeded, else the time since
// the last one that did. Writes are refused once it passes the bound set
// by WithMaxUnconfirmed.
func (r *Router) UnconfirmedFor() time.Duration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.unconfirmedForLocked(time.Now())
}

// Staleness is UnconfirmedFor.
//
// Deprecated: use UnconfirmedFor.
func (r *Router) Staleness() time.Duration { return r.UnconfirmedFor() }

func (r *Router) unconfirmedForLocked(now time.Time) time.Duration {
	if r.health.err == nil {
		return 0
	}
	return now.Sub(r.checked)
}

// dueLocked reports whether a refresh is due at now for a caller that
// asks every interval: it has passed and, after a failure, so has the
// backoff.
func (r *Router) dueLocked(now time.Time, interval time.Duration) bool {
	if now.Sub(r.checked) < interval {
		return false
	}
	return r.health.err == nil || !now.Before(r.health.nextTry)
}

// refresh checks the catalog when the refresh interval is due.
func (r *Router) refresh(ctx context.Context) { r.refreshEvery(ctx, r.opts.refresh) }

// refreshMoving is refresh for a write to a shard the map holds as moving:
// the catalog is asked every movingRefresh (or the refresh interval, when
// shorter), so that the writes the router refuses by itself end soon after
// the catalog lets the shard take them again. Concurrent writers share one
// check; a router that never refreshes (a negative interval) does not.
func (r *Router) refreshMoving(ctx context.Context) {
	r.refreshEvery(ctx, min(r.opts.refresh, movingRefresh))
}

// refreshEvery checks the catalog when interval has passed since the last
// check. While the catalog answers, the call waits for the check (so a
// state change is seen within the interval) and concurrent callers share
// one check. After a failure no call waits: one retry at a time runs in
// the background, with backoff, and calls are served from the last map.
func (r *Router) refreshEvery(ctx context.Context, interval time.Duration) {
	if r.opts.refresh < 0 {
		return
	}
	r.mu.RLock()
	due, failing := r.dueLocked(time.Now(), interval), r.health.err != nil
	r.mu.RUnlock()
	if !due {
		return
	}
	if failing {
		r.retryInBackground(interval)
		return
	}
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.RLock()
	due, failing = r.dueLocked(time.Now(), interval), r.health.err != nil
	r.mu.RUnlock()
	if !due || failing { // another caller just checked
		return
	}
	cctx, cancel := context.WithTimeout(ctx, catalogCheckTimeout)
	defer cancel()
	_, _ = r.check(cctx, ctx)
}

// retryInBackground starts one retry of a failed refresh unless one is
// running.
func (r *Router) retryInBackground(interval time.Duration) {
	if !r.retrying.CompareAndSwap(false, true) {
		return
	}
	r.mu.RLock()
	closed := r.closed
	if !closed {
		r.bgWG.Add(1) // under mu: Close waits only after it set closed
	}
	r.mu.RUnlock()
	if closed {
		r.retrying.Store(false)
		return
	}
	go func() {
		defer r.bgWG.Done()
		defer r.retrying.Store(false)
		r.reloadMu.Lock()
		defer r.reloadMu.Unlock()
		r.mu.RLock()
		due := r.dueLocked(time.Now(), interval)
		r.mu.RUnlock()
		if !due {
			return
		}
		ctx, cancel := context.WithTimeout(r.bgCtx, catalogCheckTimeout)
		defer cancel()
		_, _ = r.check(ctx, r.bgCtx)
	}()
}

// check reloads the map (reloadMu held) and records how the catalog
// answered. A failure caused by the caller (its ctx, given as owner,
// ended) or by Close says nothing about the catalog.
func (r *Router) check(ctx, owner context.Context) (bool, error) {
	r.checks.Add(1)
	start := time.Now()
	changed, err := r.reload(ctx)
	switch {
	case err == nil:
		r.noteSuccess(start, changed)
	case errors.Is(err, ErrClosed) || owner.Err() != nil:
	default:
		r.noteFailure(err)
	}
	return changed, err
}

func (r *Router) noteSuccess(start time.Time, changed bool) {
	r.mu.Lock()
	r.checkStart = start
	h := r.health
	r.health = catalogHealth{}
	gen := r.m.Generation
	r.mu.Unlock()
	if h.err != nil {
		r.opts.log.Info("shardid router: catalog reachable again; map confirmed",
			"generation", gen, "changed", changed, "outage", time.Since(h.since).Round(time.Millisecond))
	}
}

func (r *Router) noteFailure(err error) {
	now := time.Now()
	r.mu.Lock()
	first := r.health.err == nil
	if first {
		r.health.since, r.health.backoff = now, firstBackoff
	} else {
		r.health.backoff = min(2*r.health.backoff, maxBackoff)
	}
	r.health.err = err
	// Jitter: routers in many processes that lost the catalog together
	// should not all come back to it in the same instant.
	wait := r.health.backoff/2 + rand.N(r.health.backoff/2+1)
	r.health.nextTry = now.Add(wait)
	var gen int64
	if r.m != nil {
		gen = r.m.Generation
	}
	age := r.unconfirmedForLocked(now)
	r.mu.Unlock()
	if first {
		r.opts.log.Warn("shardid router: catalog unreachable; serving from the last map",
			"generation", gen, "err", err, "retry_in", wait.Round(time.Millisecond))
		return
	}
	r.opts.log.Debug("shardid router: catalog still unreachable",
		"generation", gen, "unconfirmed_for", age.Round(time.Millisecond), "err", err, "retry_in", wait.Round(time.Millisecond))
}

// refuseUnconfirmed returns ErrMapUnconfirmed (in a *ShardError) when the
// map has gone unconfirmed longer than the router's bound, nil otherwise.
func (r *Router) refuseUnconfirmed(s Shard) error {
	bound := r.opts.maxUnconfirmed
	if bound < 0 {
		return nil
	}
	r.mu.RLock()
	age := r.unconfirmedForLocked(time.Now())
	cause, warned := r.health.err, r.health.warnedUnconfirmed
	r.mu.RUnlock()
	if cause == nil || age <= bound {
		return nil
	}
	warn := false
	if !warned {
		r.mu.Lock()
		warn, r.health.warnedUnconfirmed = !r.health.warnedUnconfirmed, true
		r.mu.Unlock()
	}
	if warn {
		r.opts.log.Error("shardid router: map unconfirmed longer than its bound; refusing writes until the catalog answers",
			"generation", s.Generation, "unconfirmed_for", age.Round(time.Millisecond), "bound", bound, "err", cause)
	}
	return &ShardError{Shard: s.ID, Host: s.Host, Err: &refusal{kind: ErrMapUnconfirmed, cause: cause,
		detail: fmt.Sprintf("map of generation %d unconfirmed for %s, bound %s; catalog: %s", s.Generation, age.Round(time.Millisecond), bound, pg.OneLine(cause))}}
}

// refusal is a typed refusal (kind, for errors.Is) that keeps what caused
// it (for errors.As, e.g. the host's *pgconn.PgError).
type refusal struct {
	kind   error
	cause  error
	detail string
}

func (e *refusal) Error() string   { return e.kind.Error() + " (" + e.detail + ")" }
func (e *refusal) Unwrap() []error { return []error{e.kind, e.cause} }

// shardFailed turns an error from a transaction on shard s into the
// router's answer. A copy that is fenced, or that is gone from the host
// because the shard moved after the map s came from (the source's schema
// is renamed when a move completes, so its tables and generator no longer
// resolve), is ErrShardMoving, and the map is reloaded so that a retry
// goes to the shard's new host.
func (r *Router) shardFailed(ctx context.Context, s Shard, err error) error {
	switch {
	case fence.IsFenceError(err):
		r.reloadNow(ctx)
		return &ShardError{Shard: s.ID, Host: s.Host, Err: &refusal{kind: ErrShardMoving, cause: err, detail: pg.OneLine(err)}}
	case pg.IsUndefinedTable(err):
		if moved, ok := r.movedSince(ctx, s); ok {
			detail := fmt.Sprintf("changed at generation %d, now %s on %s; retry (%s)", moved.gen, moved.state, moved.host, pg.OneLine(err))
			return &ShardError{Shard: s.ID, Host: s.Host, Err: &refusal{kind: ErrShardMoving, cause: err, detail: detail}}
		}
	}
	return &ShardError{Shard: s.ID, Host: s.Host, Err: err}
}

// reloadNow brings the map up to date with the catalog at once, whatever
// the refresh interval, unless the catalog is failing (its retries keep
// their backoff). Many writers refused together share one check.
func (r *Router) reloadNow(ctx context.Context) bool {
	asOf := time.Now()
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.RLock()
	failing, fresh := r.health.err != nil, r.checkStart.After(asOf)
	r.mu.RUnlock()
	if failing || fresh {
		return !failing
	}
	cctx, cancel := context.WithTimeout(ctx, catalogCheckTimeout)
	defer cancel()
	_, err := r.check(cctx, ctx)
	return err == nil
}

type shardChange struct {
	gen   int64
	host  string
	state State
}

// movedSince reloads the map and reports whether the catalog changed
// shard s (its host or state) after the generation s was routed at. It
// is false when the catalog cannot say.
func (r *Router) movedSince(ctx context.Context, s Shard) (shardChange, bool) {
	if !r.reloadNow(ctx) || r.Generation() == s.Generation {
		return shardChange{}, false // the catalog cannot say, or changed nothing since
	}
	cctx, cancel := context.WithTimeout(ctx, catalogCheckTimeout)
	defer cancel()
	var c shardChange
	err := r.catalog.QueryRow(cctx, `SELECT changed_generation, host, state FROM shardid.shards WHERE id = $1`, s.ID).
		Scan(&c.gen, &c.host, &c.state)
	if err != nil || c.gen <= s.Generation {
		return c, false
	}
	return c, true
}

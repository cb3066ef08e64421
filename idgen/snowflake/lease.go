package snowflake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/internal/pgtrust"
)

// DefaultTTL is how long a worker lease lasts without renewal.
const DefaultTTL = 10 * time.Second

// DB is what the lease needs of a database: a *pgxpool.Pool, *pgx.Conn or
// pgx.Tx satisfies it. The database must have the lease tables
// (migrations.Snowflake).
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Lease describes the worker lease a generator from Start holds.
type Lease struct {
	Datacenter int64
	Worker     int64
	// Token is the fencing token: it grows with every acquisition of any
	// worker, so a write stamped with it can be refused once a later
	// holder exists.
	Token  int64
	Holder string
	// PreviousUntil is the last Unix millisecond the worker's previous
	// holders may have put into an id (0 for a fresh worker); this
	// generator's ids are all later.
	PreviousUntil int64
	TTL           time.Duration
}

// LeaseOption adjusts Start. Options are checked when Start builds the
// generator: it returns the error of one given a value it cannot use
// (ErrInvalidSettings), naming it (the convention of every package of
// shardid: see shardmgr's doc.go).
type LeaseOption func(*leaseOptions) error

type leaseOptions struct {
	ttl, heartbeat, maxWait time.Duration
	holder                  string
	logger                  *slog.Logger
}

// WithTTL sets how long a lease lasts without renewal; d >= 10ms. The
// generator stops issuing a tenth of it before it can expire. Without it,
// DefaultTTL (10s).
func WithTTL(d time.Duration) LeaseOption {
	return func(o *leaseOptions) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("%w: WithTTL(%s): want at least 10ms", ErrInvalidSettings, d)
		}
		o.ttl = d
		return nil
	}
}

// WithHeartbeat sets how often the lease is renewed; each renewal waits
// at most this long for the database. 0 < d < 0.9 of the TTL. Without it,
// a third of the TTL.
func WithHeartbeat(d time.Duration) LeaseOption {
	return func(o *leaseOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithHeartbeat(%s): want a positive interval", ErrInvalidSettings, d)
		}
		o.heartbeat = d
		return nil
	}
}

// WithMaxWait bounds how far ahead of this process's clock the last
// possible time of a worker it takes may lie: a worker whose previous
// holder's clock ran ahead, or one whose row was deleted while its holder
// lived, issues nothing until this clock passes that time. Start prefers
// a worker usable at once; when every free worker is further ahead than
// this, it takes none and returns ErrNoFreeWorker saying when the nearest
// frees. d >= 0. Without it, twice the TTL (room for a row deleted under a
// live holder and some clock skew).
func WithMaxWait(d time.Duration) LeaseOption {
	return func(o *leaseOptions) error {
		if d < 0 {
			return fmt.Errorf("%w: WithMaxWait(%s): want zero or more", ErrInvalidSettings, d)
		}
		o.maxWait = d
		return nil
	}
}

// WithHolder names the holder in the lease row; name must not be empty.
// Without it, host:pid.
func WithHolder(name string) LeaseOption {
	return func(o *leaseOptions) error {
		if name == "" {
			return fmt.Errorf("%w: WithHolder(\"\"): want a name", ErrInvalidSettings)
		}
		o.holder = name
		return nil
	}
}

// WithLogger sets where renewal failures and lost leases are logged; l
// must not be nil (to discard, pass slog.New(slog.DiscardHandler)).
// Without it, slog.Default().
func WithLogger(l *slog.Logger) LeaseOption {
	return func(o *leaseOptions) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger(nil): want a logger (slog.New(slog.DiscardHandler) to discard)", ErrInvalidSettings)
		}
		o.logger = l
		return nil
	}
}

// leaseKeeper renews a generator's lease in the background, and takes a
// new one when it is lost.
type leaseKeeper struct {
	db     DB
	opts   leaseOptions
	guard  time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex // guards info and promised
	info     Lease
	promised int64 // the newest last possible time (Unix ms) the row holds for us

	closeMu sync.Mutex
	closed  bool
}

// Start leases a worker id of s.Datacenter from the lease table in db
// and returns a generator for it that renews the lease in the background
// until Close. Its ids start strictly after the last time the worker's
// previous holders could have used; Start prefers a worker whose last time
// is already behind this clock (see WithMaxWait). If the lease cannot be
// renewed, the generator stops issuing (ErrLeaseExpired) before the lease
// can expire in the database, and resumes if a later renewal succeeds. If
// a renewal does not find the generator's token (another holder took the
// worker, or someone deleted the row), it stops at once (ErrLeaseLost)
// and leases a worker again, issuing again strictly after everything the
// old lease could have covered.
//
// Every generator leasing from one table must use the same layout.
func Start(ctx context.Context, db DB, s Settings, opts ...LeaseOption) (*Generator, error) {
	o := leaseOptions{ttl: DefaultTTL, maxWait: -1, logger: slog.Default()}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil LeaseOption", ErrInvalidSettings)
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.heartbeat == 0 {
		o.heartbeat = o.ttl / 3
	}
	if o.maxWait < 0 {
		o.maxWait = 2 * o.ttl
	}
	if o.holder == "" {
		host, _ := os.Hostname()
		o.holder = host + ":" + strconv.Itoa(os.Getpid())
	}
	guard := o.ttl / 10
	if o.ttl < 10*time.Millisecond || o.heartbeat <= 0 || o.heartbeat >= o.ttl-guard || o.maxWait < 0 {
		return nil, fmt.Errorf("%w: ttl %s, heartbeat %s and max wait %s: want ttl >= 10ms, 0 < heartbeat < 0.9 ttl, max wait >= 0", ErrInvalidSettings, o.ttl, o.heartbeat, o.maxWait)
	}
	g, err := newGenerator(s)
	if err != nil {
		return nil, err
	}
	if err := checkTrust(ctx, db); err != nil {
		return nil, err
	}
	k := &leaseKeeper{db: db, opts: o, guard: guard, done: make(chan struct{})}
	k.info = Lease{Datacenter: s.Datacenter, Holder: o.holder, TTL: o.ttl}
	g.lease = k
	g.deadline.Store(-1) // nothing before the lease
	if err := k.acquire(ctx, g, 0); err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.cancel = cancel
	go k.run(hctx, g)
	return g, nil
}

// checkTrust refuses, before the first lease is written, a lease
// database whose schema shardid another role made or put anything in
// (pgtrust.Check): a trigger on the lease tables would run its code as
// this role at every lease and renewal. Once it passed, only that
// schema's owner (this role or a superuser) can put anything there.
func checkTrust(ctx context.Context, db DB) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("snowflake: check the lease database: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := pgtrust.Check(ctx, tx, "shardid"); err != nil {
		return fmt.Errorf("snowflake: lease database: %w", err)
	}
	return nil
}

// ceilingOf is the promise a holder makes at clock reading t0: no id later
// than t0 + TTL (in Unix ms), and the tick that holds it.
func (k *leaseKeeper) ceilingOf(g *Generator, t0 time.Time) (ms, tick int64) {
	ms = t0.UnixMilli() + k.opts.ttl.Milliseconds()
	return ms, min(g.l.tickOf(ms), g.l.maxTicks())
}

// acquire leases a worker and points g at it, its ids strictly after both
// the worker's previous holders and floorMs (Unix ms; a lost lease's
// promise).
func (k *leaseKeeper) acquire(ctx context.Context, g *Generator, floorMs int64) error {
	dc := k.info.Datacenter
	t0 := g.now()
	ceilMs, ceilTick := k.ceilingOf(g, t0)
	var worker, token, prev int64
	err := pgx.BeginFunc(ctx, k.db, func(tx pgx.Tx) error {
		var maxSeen, marked int64
		if err := tx.QueryRow(ctx, ensureMarksSQL, dc).Scan(&maxSeen, &marked); err != nil {
			return err
		}
		nowMs := t0.UnixMilli()
		err := tx.QueryRow(ctx, pickSQL, dc, g.l.MaxWorker(), nowMs, maxSeen, marked).Scan(&worker, &prev)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: datacenter %d has %d workers, all leased", ErrNoFreeWorker, dc, g.l.MaxWorker()+1)
		}
		if err != nil {
			return err
		}
		prev = max(prev, floorMs)
		if ahead := time.Duration(prev-nowMs) * time.Millisecond; ahead > k.opts.maxWait {
			return fmt.Errorf("%w: datacenter %d: the nearest free worker, %d, was used up to %s, %s ahead of this clock (waits up to %s)",
				ErrNoFreeWorker, dc, worker, time.UnixMilli(prev).UTC().Format(time.RFC3339Nano), ahead.Round(time.Millisecond), k.opts.maxWait)
		}
		err = tx.QueryRow(ctx, takeSQL, dc, worker, k.opts.holder, k.opts.ttl.Milliseconds(), max(prev, ceilMs)).Scan(&token)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: datacenter %d worker %d was renewed by its holder meanwhile", ErrNoFreeWorker, dc, worker)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, markSQL, dc, worker, max(prev, ceilMs))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNoFreeWorker) {
			return err
		}
		return fmt.Errorf("snowflake: lease a worker of datacenter %d: %w", dc, err)
	}
	k.mu.Lock()
	k.info.Worker, k.info.Token, k.info.PreviousUntil = worker, token, prev
	k.promised = max(prev, ceilMs)
	k.mu.Unlock()
	g.repoint(dc<<g.l.WorkerBits|worker, prev, t0.Sub(g.base)+k.opts.ttl-k.guard, ceilTick)
	// The previous holder's clock may run a little ahead of ours: let
	// ours pass its last time here rather than refuse the first ids.
	wait := time.Duration(g.l.tickStart(g.l.tickOf(prev)+1)-g.now().UnixMilli()) * time.Millisecond
	if prev > 0 && wait > 0 && wait <= k.opts.heartbeat {
		g.sleep(wait)
	}
	k.opts.logger.Info("snowflake worker leased", "datacenter", dc, "worker", worker, "token", token, "previous_until_ms", prev)
	if prev > 0 && wait > k.opts.heartbeat {
		k.opts.logger.Warn("snowflake worker usable only once this clock passes its previous holders' last time",
			"datacenter", dc, "worker", worker, "in", wait.Round(time.Millisecond))
	}
	return nil
}

func (k *leaseKeeper) run(ctx context.Context, g *Generator) {
	defer close(k.done)
	t := time.NewTicker(k.opts.heartbeat)
	defer t.Stop()
	lost := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if lost {
			k.mu.Lock()
			floor := k.promised
			k.mu.Unlock()
			actx, cancel := context.WithTimeout(ctx, k.opts.ttl)
			err := k.acquire(actx, g, floor)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					k.opts.logger.Warn("snowflake lease not taken again yet; retrying", "datacenter", k.info.Datacenter, "err", err)
				}
				continue
			}
			lost = false
			continue
		}
		if err := k.renew(ctx, g); errors.Is(err, ErrLeaseLost) {
			lost = true
		}
	}
}

func (k *leaseKeeper) renew(ctx context.Context, g *Generator) error {
	t0 := g.now()
	ceilMs, ceilTick := k.ceilingOf(g, t0)
	rctx, cancel := context.WithTimeout(ctx, k.opts.heartbeat)
	defer cancel()
	k.mu.Lock()
	info := k.info
	k.mu.Unlock()
	var token int64
	err := pgx.BeginFunc(rctx, k.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(rctx, markSQL, info.Datacenter, info.Worker, ceilMs); err != nil {
			return err
		}
		return tx.QueryRow(rctx, renewSQL, info.Datacenter, info.Worker, info.Token, k.opts.ttl.Milliseconds(), ceilMs).Scan(&token)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = fmt.Errorf("%w: datacenter %d worker %d has no row with token %d", ErrLeaseLost, info.Datacenter, info.Worker, info.Token)
		g.stop(err)
		k.opts.logger.Error("snowflake lease lost; no ids until a new lease", "datacenter", info.Datacenter, "worker", info.Worker, "token", info.Token)
		return err
	case err != nil:
		if ctx.Err() == nil {
			k.opts.logger.Warn("snowflake lease not renewed", "datacenter", info.Datacenter, "worker", info.Worker, "err", err)
		}
		return err
	}
	k.mu.Lock()
	k.promised = max(k.promised, ceilMs)
	k.mu.Unlock()
	g.extend(t0.Sub(g.base)+k.opts.ttl-k.guard, ceilTick)
	return nil
}

// Lease returns the lease a generator from Start holds (the latest one,
// after a lost lease was taken again), and false for one from New.
func (g *Generator) Lease() (Lease, bool) {
	if g.lease == nil {
		return Lease{}, false
	}
	g.lease.mu.Lock()
	defer g.lease.mu.Unlock()
	return g.lease.info, true
}

// Close stops the generator: NextID returns ErrClosed from now on. A
// leased generator then releases its worker, recording the last time it
// actually used so that the next holder can start at once; the release
// waits at most the lease's TTL, after which the lease expires by itself.
// Close is idempotent; a generator from New needs no Close.
func (g *Generator) Close(ctx context.Context) error {
	k := g.lease
	if k == nil {
		g.stop(ErrClosed)
		return nil
	}
	k.closeMu.Lock()
	defer k.closeMu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	// The keeper first: it must not point the generator at a new lease
	// after the stop.
	k.cancel()
	<-k.done
	last := g.stop(ErrClosed)
	closed := ErrClosed
	g.stopErr.Store(&closed) // over ErrLeaseLost, if the lease was lost
	k.mu.Lock()
	info := k.info
	k.mu.Unlock()
	used := info.PreviousUntil
	if last >= 0 {
		used = max(used, g.l.tickStart(last+1)-1)
	}
	// The release waits at most the lease's TTL (a renewal's transaction,
	// or anyone's lock on the row, can hold it up): past the TTL the lease
	// has expired by itself, and the next holder waits out only the TTL.
	rctx, cancel := context.WithTimeout(ctx, k.opts.ttl)
	defer cancel()
	var token int64
	err := k.db.QueryRow(rctx, releaseSQL, info.Datacenter, info.Worker, info.Token, used).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // someone else holds it: nothing of ours to release
	}
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return fmt.Errorf("snowflake: release datacenter %d worker %d: not done within the lease's TTL %s (its row locked?); the lease expires by itself: %w", info.Datacenter, info.Worker, k.opts.ttl, err)
	}
	if err != nil {
		return fmt.Errorf("snowflake: release datacenter %d worker %d: %w", info.Datacenter, info.Worker, err)
	}
	return nil
}

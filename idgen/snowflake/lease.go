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
)

// DefaultTTL is how long a worker lease lasts without renewal.
const DefaultTTL = 10 * time.Second

// DB is what the lease needs of a database: a *pgxpool.Pool, *pgx.Conn or
// pgx.Tx satisfies it. The database must have the lease table
// (migrations.Snowflake).
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
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

// LeaseOption adjusts Start.
type LeaseOption func(*leaseOptions)

type leaseOptions struct {
	ttl, heartbeat time.Duration
	holder         string
	logger         *slog.Logger
}

// WithTTL sets how long a lease lasts without renewal (default DefaultTTL).
// The generator stops issuing a tenth of it before it can expire.
func WithTTL(d time.Duration) LeaseOption { return func(o *leaseOptions) { o.ttl = d } }

// WithHeartbeat sets how often the lease is renewed (default a third of the
// TTL); each renewal waits at most this long for the database.
func WithHeartbeat(d time.Duration) LeaseOption { return func(o *leaseOptions) { o.heartbeat = d } }

// WithHolder names the holder in the lease row (default host:pid).
func WithHolder(name string) LeaseOption { return func(o *leaseOptions) { o.holder = name } }

// WithLogger sets where renewal failures and lost leases are logged
// (default nowhere).
func WithLogger(l *slog.Logger) LeaseOption { return func(o *leaseOptions) { o.logger = l } }

// leaseKeeper renews a generator's lease in the background.
type leaseKeeper struct {
	db      DB
	opts    leaseOptions
	guard   time.Duration
	info    Lease
	cancel  context.CancelFunc
	done    chan struct{}
	closeMu sync.Mutex
	closed  bool
}

const (
	// Take the lowest worker whose lease expired; its row keeps the last
	// time its holders could have used, returned as prev.
	takeExpiredSQL = `
WITH f AS (
    SELECT worker, used_until_ms FROM shardid.snowflake_leases
    WHERE datacenter = $1 AND worker <= $5 AND expires_at < now()
    ORDER BY worker LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE shardid.snowflake_leases l
SET token = nextval('shardid.snowflake_lease_tokens'), holder = $2,
    expires_at = now() + $3 * interval '1 millisecond',
    used_until_ms = GREATEST(l.used_until_ms, $4), acquired_at = now()
FROM f WHERE l.datacenter = $1 AND l.worker = f.worker
RETURNING l.worker, l.token, f.used_until_ms`
	// Take the lowest worker never leased. Two processes racing for it
	// meet at the primary key; the loser tries again.
	takeFreshSQL = `
INSERT INTO shardid.snowflake_leases (datacenter, worker, token, holder, expires_at, used_until_ms)
SELECT $1, c.w, nextval('shardid.snowflake_lease_tokens'), $2, now() + $3 * interval '1 millisecond', $4
FROM (SELECT w FROM generate_series(0, $5::int) w
      WHERE NOT EXISTS (SELECT 1 FROM shardid.snowflake_leases WHERE datacenter = $1 AND worker = w)
      ORDER BY w LIMIT 1) c
ON CONFLICT DO NOTHING
RETURNING worker, token, 0::bigint`
	// Renew while the token is ours, even past expires_at: a lease that
	// expired but was not taken still has our token, and nobody else has
	// used the worker.
	renewSQL = `
UPDATE shardid.snowflake_leases
SET expires_at = now() + $4 * interval '1 millisecond', used_until_ms = GREATEST(used_until_ms, $5)
WHERE datacenter = $1 AND worker = $2 AND token = $3
RETURNING token`
	// Release: expire now and record the last time actually used, so the
	// next holder need not wait for the promise.
	releaseSQL = `
UPDATE shardid.snowflake_leases SET expires_at = now(), used_until_ms = $4
WHERE datacenter = $1 AND worker = $2 AND token = $3
RETURNING token`
)

// Start leases a free worker id of s.Datacenter from the lease table in db
// and returns a generator for it that renews the lease in the background
// until Close. Its ids start strictly after the last time the worker's
// previous holders could have used. If the lease cannot be renewed, the
// generator stops issuing (ErrLeaseExpired) before the lease can expire in
// the database, and resumes if a later renewal succeeds; if another holder
// took the worker, it stops for good (ErrLeaseLost).
//
// Every generator leasing from one table must use the same layout.
func Start(ctx context.Context, db DB, s Settings, opts ...LeaseOption) (*Generator, error) {
	o := leaseOptions{ttl: DefaultTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if o.heartbeat == 0 {
		o.heartbeat = o.ttl / 3
	}
	if o.holder == "" {
		host, _ := os.Hostname()
		o.holder = host + ":" + strconv.Itoa(os.Getpid())
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	guard := o.ttl / 10
	if o.ttl < 10*time.Millisecond || o.heartbeat <= 0 || o.heartbeat >= o.ttl-guard {
		return nil, fmt.Errorf("%w: ttl %s and heartbeat %s: want ttl >= 10ms and 0 < heartbeat < 0.9 ttl", ErrInvalidSettings, o.ttl, o.heartbeat)
	}
	g, err := newGenerator(s)
	if err != nil {
		return nil, err
	}
	k := &leaseKeeper{db: db, opts: o, guard: guard, done: make(chan struct{})}
	k.info = Lease{Datacenter: s.Datacenter, Holder: o.holder, TTL: o.ttl}
	g.lease = k
	g.deadline.Store(-1) // nothing before the lease
	if err := k.acquire(ctx, g); err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.cancel = cancel
	go k.run(hctx, g)
	return g, nil
}

// ceilingOf is the promise a holder makes at clock reading t0: no id later
// than t0 + TTL (in Unix ms), and the tick that holds it.
func (k *leaseKeeper) ceilingOf(g *Generator, t0 time.Time) (ms, tick int64) {
	ms = t0.UnixMilli() + k.opts.ttl.Milliseconds()
	return ms, min(g.l.tickOf(ms), g.l.maxTicks())
}

func (k *leaseKeeper) acquire(ctx context.Context, g *Generator) error {
	maxWorker := g.l.MaxWorker()
	for range 8 {
		t0 := g.now()
		ceilMs, ceilTick := k.ceilingOf(g, t0)
		args := []any{k.info.Datacenter, k.opts.holder, k.opts.ttl.Milliseconds(), ceilMs, maxWorker}
		var worker, token, prev int64
		err := k.db.QueryRow(ctx, takeExpiredSQL, args...).Scan(&worker, &token, &prev)
		if errors.Is(err, pgx.ErrNoRows) {
			err = k.db.QueryRow(ctx, takeFreshSQL, args...).Scan(&worker, &token, &prev)
			if errors.Is(err, pgx.ErrNoRows) {
				var free bool
				if err := k.db.QueryRow(ctx, `SELECT count(*) <= $2 FROM shardid.snowflake_leases WHERE datacenter = $1 AND worker <= $2`,
					k.info.Datacenter, maxWorker).Scan(&free); err != nil {
					return fmt.Errorf("snowflake: lease a worker of datacenter %d: %w", k.info.Datacenter, err)
				}
				if !free {
					return fmt.Errorf("%w: datacenter %d has %d workers, all leased", ErrNoFreeWorker, k.info.Datacenter, maxWorker+1)
				}
				continue // lost a race for a fresh worker
			}
		}
		if err != nil {
			return fmt.Errorf("snowflake: lease a worker of datacenter %d: %w", k.info.Datacenter, err)
		}
		k.info.Worker, k.info.Token, k.info.PreviousUntil = worker, token, prev
		g.node = k.info.Datacenter<<g.l.WorkerBits | worker
		if floor := g.l.tickOf(prev); prev > 0 && floor >= 0 {
			g.state.Store(floor<<g.l.SeqBits | g.l.seqMask())
		}
		g.extend(t0.Sub(g.base)+k.opts.ttl-k.guard, ceilTick)
		// The previous holder's clock may run a little ahead of ours: let
		// ours pass its last time here rather than refuse the first ids.
		if d := time.Duration(g.l.tickStart(g.l.tickOf(prev)+1)-g.now().UnixMilli()) * time.Millisecond; prev > 0 && d > 0 && d <= k.opts.heartbeat {
			g.sleep(d)
		}
		k.opts.logger.Info("snowflake worker leased", "datacenter", k.info.Datacenter, "worker", worker, "token", token, "previous_until_ms", prev)
		return nil
	}
	return fmt.Errorf("%w: datacenter %d: lost every race for a fresh worker", ErrNoFreeWorker, k.info.Datacenter)
}

func (k *leaseKeeper) run(ctx context.Context, g *Generator) {
	defer close(k.done)
	t := time.NewTicker(k.opts.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := k.renew(ctx, g); errors.Is(err, ErrLeaseLost) {
			return
		}
	}
}

func (k *leaseKeeper) renew(ctx context.Context, g *Generator) error {
	t0 := g.now()
	ceilMs, ceilTick := k.ceilingOf(g, t0)
	rctx, cancel := context.WithTimeout(ctx, k.opts.heartbeat)
	defer cancel()
	var token int64
	err := k.db.QueryRow(rctx, renewSQL, k.info.Datacenter, k.info.Worker, k.info.Token, k.opts.ttl.Milliseconds(), ceilMs).Scan(&token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = fmt.Errorf("%w: datacenter %d worker %d has a token other than %d", ErrLeaseLost, k.info.Datacenter, k.info.Worker, k.info.Token)
		g.stop(err)
		k.opts.logger.Error("snowflake lease lost; no more ids", "datacenter", k.info.Datacenter, "worker", k.info.Worker, "token", k.info.Token)
		return err
	case err != nil:
		if ctx.Err() == nil {
			k.opts.logger.Warn("snowflake lease not renewed", "datacenter", k.info.Datacenter, "worker", k.info.Worker, "err", err)
		}
		return err
	}
	g.extend(t0.Sub(g.base)+k.opts.ttl-k.guard, ceilTick)
	return nil
}

// Lease returns the lease a generator from Start holds, and false for one
// from New.
func (g *Generator) Lease() (Lease, bool) {
	if g.lease == nil {
		return Lease{}, false
	}
	return g.lease.info, true
}

// Close stops the generator: NextID returns ErrClosed from now on. A
// leased generator then releases its worker, recording the last time it
// actually used so that the next holder can start at once. Close is
// idempotent; a generator from New needs no Close.
func (g *Generator) Close(ctx context.Context) error {
	last := g.stop(ErrClosed)
	k := g.lease
	if k == nil {
		return nil
	}
	k.closeMu.Lock()
	defer k.closeMu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	k.cancel()
	<-k.done
	used := k.info.PreviousUntil
	if last >= 0 {
		used = max(used, g.l.tickStart(last+1)-1)
	}
	var token int64
	err := k.db.QueryRow(ctx, releaseSQL, k.info.Datacenter, k.info.Worker, k.info.Token, used).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // someone else holds it: nothing of ours to release
	}
	if err != nil {
		return fmt.Errorf("snowflake: release datacenter %d worker %d: %w", k.info.Datacenter, k.info.Worker, err)
	}
	return nil
}

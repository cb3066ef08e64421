package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// budget bounds the connections the handle holds per server: a place is
// taken when a connection is dialled and given back when it closes,
// whichever pool or single connection it belongs to. A dial that finds no
// place closes an idle connection of a pool on the server, so that idle
// connections never starve work. Several places can be taken at once
// (reserve), for work that needs two connections together (a copy's
// source and target): taking them one by one would let such works hold
// one each and wait for the other forever.
type budget struct {
	opts options
	done chan struct{} // closed when the handle closes: waits end

	mu    sync.Mutex
	used  map[string]int
	freed chan struct{} // closed and replaced when a place is given back
	pools map[string][]*pgxpool.Pool
}

func newBudget(o options) *budget {
	return &budget{opts: o, done: make(chan struct{}), used: map[string]int{}, freed: make(chan struct{}), pools: map[string][]*pgxpool.Pool{}}
}

// serverOf names the server a connection config dials: for a DSN naming
// several servers (a primary and its standbys), the set of them, whose
// one budget bounds the connections on whichever is primary.
func serverOf(cfg *pgconn.Config) string {
	return pg.Servers(cfg)
}

// register counts p's idle connections among those a starved dial on its
// server may close.
func (b *budget) register(cfg *pgxpool.Config, p *pgxpool.Pool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := serverOf(&cfg.ConnConfig.Config)
	b.pools[s] = append(b.pools[s], p)
}

// freeIdle closes one idle connection on server, if a pool has one.
func (b *budget) freeIdle(ctx context.Context, server string) {
	b.mu.Lock()
	pools := slices.Clone(b.pools[server])
	b.mu.Unlock()
	for _, p := range pools {
		idle := p.AcquireAllIdle(ctx)
		for i, c := range idle {
			if i == 0 {
				c.Conn().Close(ctx) // the pool drops it on release; its place comes back
			}
			c.Release()
		}
		if len(idle) > 0 {
			return
		}
	}
}

// MaxBudgetWait bounds how long a connection waits for a free place in
// its server's budget: work on many hosts of one server queues here, not
// at the server.
const MaxBudgetWait = 10 * time.Minute

// take takes need[server] places on each server, all at once or none,
// waiting (bounded by ctx and MaxBudgetWait) until they are free.
func (b *budget) take(ctx context.Context, need map[string]int) error {
	for s, n := range need {
		if n > b.opts.connsPerServer {
			return fmt.Errorf("work needs %d connections to %s at once; this run may hold %d", n, s, b.opts.connsPerServer)
		}
	}
	bound := time.NewTimer(MaxBudgetWait)
	defer bound.Stop()
	for {
		b.mu.Lock()
		var short []string
		for s, n := range need {
			if b.used[s]+n > b.opts.connsPerServer {
				short = append(short, s)
			}
		}
		if len(short) == 0 {
			for s, n := range need {
				b.used[s] += n
			}
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		slices.Sort(short)
		select {
		case <-freed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for one of the %d connections to %s this run may hold: %w", b.opts.connsPerServer, short[0], ctx.Err())
		case <-bound.C:
			return fmt.Errorf("waited %s for one of the %d connections to %s this run may hold", MaxBudgetWait, b.opts.connsPerServer, short[0])
		case <-b.done:
			return ErrClosed
		case <-time.After(50 * time.Millisecond):
			for _, s := range short {
				b.freeIdle(ctx, s)
			}
		}
	}
}

// give gives n places on server back.
func (b *budget) give(server string, n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used[server] -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

// reservation is places taken ahead by reserve; a dial made with a
// context carrying it uses them before taking new ones.
type reservation struct {
	b    *budget
	mu   sync.Mutex
	left map[string]int
}

type reservationKey struct{}

// use takes one of r's places on server, if it has one left.
func (r *reservation) use(server string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left[server] == 0 {
		return false
	}
	r.left[server]--
	return true
}

// release gives back the places not used.
func (r *reservation) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, n := range r.left {
		r.b.give(s, n)
	}
	clear(r.left)
}

// apply makes cfg's connections draw on the budget of the server they
// dial, and retry a dial the network refuses or times out. cfg's connect
// timeout (set by the caller) then bounds each dial and the session's
// start, not the wait for a place in the budget, which MaxBudgetWait
// bounds: pgconn would count that wait against the connect timeout.
func (b *budget) apply(cfg *pgconn.Config) {
	dial := cfg.DialFunc
	server := serverOf(cfg)
	connectTimeout := cfg.ConnectTimeout
	cfg.ConnectTimeout = 0
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if r, ok := ctx.Value(reservationKey{}).(*reservation); !ok || r.b != b || !r.use(server) {
			if err := b.take(ctx, map[string]int{server: 1}); err != nil {
				return nil, err
			}
		}
		release := sync.OnceFunc(func() { b.give(server, 1) })
		conn, err := b.dial(ctx, dial, network, addr, connectTimeout)
		if err != nil {
			release()
			return nil, err
		}
		// The session's start (TLS, authentication, settings) within the
		// connect timeout too; AfterConnect lifts the deadline.
		if err := conn.SetDeadline(time.Now().Add(connectTimeout)); err != nil {
			conn.Close()
			release()
			return nil, err
		}
		return &budgetConn{Conn: conn, release: release}, nil
	}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if err := c.Conn().SetDeadline(time.Time{}); err != nil {
			return err
		}
		if after != nil {
			return after(ctx, c)
		}
		return nil
	}
}

// close ends the waits for a place in the budget.
func (b *budget) close() { close(b.done) }

// dial dials addr, retrying with backoff while the network refuses or
// times out and ctx (bounded by the connect timeout) allows.
func (b *budget) dial(ctx context.Context, dial pgconn.DialFunc, network, addr string, timeout time.Duration) (net.Conn, error) {
	wait := b.opts.backoff
	var err error
	for try := 1; ; try++ {
		var conn net.Conn
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err = dial(dctx, network, addr)
		cancel()
		if err == nil {
			return conn, nil
		}
		var ne net.Error
		if try >= b.opts.connectTries || ctx.Err() != nil || !errors.As(err, &ne) {
			return nil, err
		}
		b.opts.log.Warn("connect failed; retrying", "server", addr, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// closeWait bounds how long a closing connection waits for its server
// to end the session before giving its place back anyway (a backend busy
// with a statement reads nothing until it is done).
const closeWait = 5 * time.Second

// budgetConn gives its place back when it closes, once the server has
// ended the session: a backend lives on for a moment after the client
// hangs up, and a place given back at once would let a new connection's
// backend start beside it, one over the budget.
type budgetConn struct {
	net.Conn
	release func()
	once    sync.Once
	err     error
}

func (c *budgetConn) Close() error {
	c.once.Do(func() {
		defer c.release()
		// Half-close, so that the backend reads the end of its input and
		// exits (after pgconn's Terminate, or without one), then wait for
		// its side to close: it does so on exit, after it has left
		// pg_stat_activity.
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			if c.Conn.SetReadDeadline(time.Now().Add(closeWait)) == nil {
				_, _ = io.Copy(io.Discard, c.Conn)
			}
		}
		c.err = c.Conn.Close()
	})
	return c.err
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/internal/pg"
)

// budget bounds the connections the handle holds per server: a token is
// taken when a connection is dialled and given back when it closes,
// whichever pool it belongs to. A dial that finds no token closes an idle
// connection of another pool on the server, so that idle connections
// never starve work.
type budget struct {
	opts options
	done chan struct{} // closed when the handle closes: waits end

	mu      sync.Mutex
	servers map[string]chan struct{}
	pools   map[string][]*pgxpool.Pool
}

func newBudget(o options) *budget {
	return &budget{opts: o, done: make(chan struct{}), servers: map[string]chan struct{}{}, pools: map[string][]*pgxpool.Pool{}}
}

// serverOf names the server a pool's connections go to: for a DSN naming
// several servers (a primary and its standbys), the set of them, whose
// one budget bounds the connections on whichever is primary.
func serverOf(cfg *pgxpool.Config) string {
	return pg.Servers(&cfg.ConnConfig.Config)
}

// register counts p's idle connections among those a starved dial on its
// server may close.
func (b *budget) register(cfg *pgxpool.Config, p *pgxpool.Pool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := serverOf(cfg)
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
				c.Conn().Close(ctx) // the pool drops it on release; its token comes back
			}
			c.Release()
		}
		if len(idle) > 0 {
			return
		}
	}
}

// tokens is server's token channel (buffered to the budget).
func (b *budget) tokens(server string) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.servers[server]
	if !ok {
		t = make(chan struct{}, b.opts.connsPerServer)
		b.servers[server] = t
	}
	return t
}

// MaxBudgetWait bounds how long a connection waits for a free place in
// its server's budget: work on many hosts of one server queues here, not
// at the server.
const MaxBudgetWait = 10 * time.Minute

// apply makes cfg's connections draw on the budget of the server they
// dial, and retry a dial the network refuses or times out. cfg's connect
// timeout (set by the caller) then bounds each dial and the session's
// start, not the wait for a place in the budget, which MaxBudgetWait
// bounds: pgconn would count that wait against the connect timeout.
func (b *budget) apply(cfg *pgxpool.Config) {
	cfg.MaxConns = int32(b.opts.connsPerServer)
	dial := cfg.ConnConfig.DialFunc
	server := serverOf(cfg)
	connectTimeout := cfg.ConnConfig.ConnectTimeout
	cfg.ConnConfig.ConnectTimeout = 0
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		t := b.tokens(server)
		bound := time.NewTimer(MaxBudgetWait)
		defer bound.Stop()
	wait:
		for {
			select {
			case t <- struct{}{}:
				break wait
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for one of the %d connections to %s this run may hold: %w", cap(t), server, ctx.Err())
			case <-bound.C:
				return nil, fmt.Errorf("waited %s for one of the %d connections to %s this run may hold", MaxBudgetWait, cap(t), server)
			case <-b.done:
				return nil, ErrClosed
			case <-time.After(50 * time.Millisecond):
				b.freeIdle(ctx, server)
			}
		}
		conn, err := b.dial(ctx, dial, network, addr, connectTimeout)
		if err != nil {
			<-t
			return nil, err
		}
		// The session's start (TLS, authentication, settings) within the
		// connect timeout too; AfterConnect lifts the deadline.
		if err := conn.SetDeadline(time.Now().Add(connectTimeout)); err != nil {
			conn.Close()
			<-t
			return nil, err
		}
		return &budgetConn{Conn: conn, release: sync.OnceFunc(func() { <-t })}, nil
	}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if err := c.PgConn().Conn().SetDeadline(time.Time{}); err != nil {
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

// budgetConn gives its token back when it closes.
type budgetConn struct {
	net.Conn
	release func()
}

func (c *budgetConn) Close() error {
	c.release()
	return c.Conn.Close()
}

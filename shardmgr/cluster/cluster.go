package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
)

// DefaultConnsPerServer is the connection budget per PostgreSQL server
// unless WithConnsPerServer says: enough for a few hosts' workers at
// once, far below a default max_connections of 100.
const DefaultConnsPerServer = 32

// DefaultConnectTries is how many times a connection is attempted when the
// network refuses or times out, unless WithConnectRetry says.
const DefaultConnectTries = 4

// DefaultConnectBackoff is the wait before the second connect attempt
// (each next one waits twice as long), unless WithConnectRetry says.
const DefaultConnectBackoff = 250 * time.Millisecond

var (
	// ErrClosed is returned for work asked of a closed handle.
	ErrClosed = errors.New("cluster handle closed")
	// ErrBudgetTooSmall is returned for work the handle's connection
	// budget cannot hold (Need).
	ErrBudgetTooSmall = errors.New("connection budget too small")
)

// Option adjusts Open. Options are checked when the handle is built:
// Open returns the error of one given a value it cannot use, naming it
// (the convention of every package of shardid: see shardmgr's doc.go).
type Option func(*options) error

type options struct {
	log            *slog.Logger
	connsPerServer int
	connectTries   int
	backoff        time.Duration
	application    string
}

// DefaultApplication is the application name the handle's sessions show
// in pg_stat_activity unless WithApplicationName, the session kind or the
// DSN says otherwise.
const DefaultApplication = "shardid"

// MaxConnsPerServer bounds WithConnsPerServer: far beyond any server's
// max_connections, it only catches a typo.
const MaxConnsPerServer = 10000

// WithApplicationName names the handle's sessions (application_name, at
// most 63 bytes, as PostgreSQL keeps) unless a session kind or the DSN
// names them. Without it, DefaultApplication (shardid).
func WithApplicationName(name string) Option {
	return func(o *options) error {
		if name == "" || len(name) > 63 {
			return fmt.Errorf("cluster: WithApplicationName(%q): want 1 to 63 bytes", name)
		}
		o.application = name
		return nil
	}
}

// WithLogger sends the handle's messages (retried connects, and the
// lines of the work done with it that has no Logger of its own) to log;
// log must not be nil (to discard, pass slog.New(slog.DiscardHandler)).
// Without it, slog.Default().
func WithLogger(log *slog.Logger) Option {
	return func(o *options) error {
		if log == nil {
			return errors.New("cluster: WithLogger(nil): want a logger (slog.New(slog.DiscardHandler) to discard)")
		}
		o.log = log
		return nil
	}
}

// WithConnsPerServer bounds the connections the handle holds on one
// server (host:port), all its databases, pools and single connections
// together; 1 <= n <= MaxConnsPerServer. Without it,
// DefaultConnsPerServer (32).
func WithConnsPerServer(n int) Option {
	return func(o *options) error {
		if n < 1 || n > MaxConnsPerServer {
			return fmt.Errorf("cluster: WithConnsPerServer(%d): want 1 to %d", n, MaxConnsPerServer)
		}
		o.connsPerServer = n
		return nil
	}
}

// WithConnectRetry makes a connect that the network refuses or times out
// try tries times in all, waiting backoff, then twice that, and so on;
// tries >= 1, backoff > 0. Without it, DefaultConnectTries (4) and
// DefaultConnectBackoff (250ms).
func WithConnectRetry(tries int, backoff time.Duration) Option {
	return func(o *options) error {
		if tries < 1 || backoff <= 0 {
			return fmt.Errorf("cluster: WithConnectRetry(%d, %s): want at least 1 try and a positive backoff", tries, backoff)
		}
		o.connectTries, o.backoff = tries, backoff
		return nil
	}
}

// Session is a kind of session a pool's connections run as: the bounds
// every statement runs under and the application name pg_stat_activity
// shows. The zero value is the toolkit's default session.
type Session struct {
	// LockTimeout bounds every statement's lock waits (zero: the
	// server's lock_timeout; the toolkit sets its own where it takes a
	// lock). StatementTimeout bounds every statement (zero: none, whatever
	// the server, database or role sets). Every session runs with
	// idle_in_transaction_session_timeout off, and transaction_timeout off
	// on PostgreSQL 17+ (pgsession.OwnTimeouts).
	LockTimeout, StatementTimeout time.Duration
	// Application names the session unless the DSN does (empty: the
	// handle's name, WithApplicationName).
	Application string
}

type poolKey struct {
	db      string // "" for the catalog, else the host's name
	session Session
}

// Cluster is an open handle on one cluster. It is safe for concurrent
// use; Close it once.
type Cluster struct {
	cfg    *shardmgr.Config
	opts   options
	budget *budget

	mu      sync.Mutex
	closed  bool
	pools   map[poolKey]*pgxpool.Pool
	checked map[string]error // schema checks made, by "catalog/use" or "host/name/use"
}

// Open validates cfg (the cluster part: shardmgr.Config.ValidateCluster)
// and the options, and returns a handle on the cluster. It connects to
// nothing yet: pools open lazily, so a cluster whose databases init has
// still to create can be opened.
func Open(ctx context.Context, cfg *shardmgr.Config, opts ...Option) (*Cluster, error) {
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	o := options{log: slog.Default(), connsPerServer: DefaultConnsPerServer, connectTries: DefaultConnectTries, backoff: DefaultConnectBackoff, application: DefaultApplication}
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("cluster: nil Option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Cluster{cfg: cfg, opts: o, budget: newBudget(o), pools: map[poolKey]*pgxpool.Pool{}, checked: map[string]error{}}, nil
}

// Config is the cluster file the handle was opened with (validated).
func (c *Cluster) Config() *shardmgr.Config { return c.cfg }

// ConnsPerServer is the handle's budget: the most connections it holds
// on one server (WithConnsPerServer).
func (c *Cluster) ConnsPerServer() int { return c.opts.connsPerServer }

// Need refuses work that holds a session (a lock) while it opens others
// on the same server, when the budget is below n: such work would wait
// for its own place forever. what names the work.
func (c *Cluster) Need(n int, what string) error {
	if c.opts.connsPerServer < n {
		return fmt.Errorf("%w: %s needs at least %d connections per server (it holds a lock session while it works there); this handle may hold %d", ErrBudgetTooSmall, what, n, c.opts.connsPerServer)
	}
	return nil
}

// Logger is the handle's logger.
func (c *Cluster) Logger() *slog.Logger { return c.opts.log }

// Close closes every pool; work in flight finishes first. Closing again
// does nothing.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	pools := c.pools
	c.pools, c.closed = nil, true
	c.mu.Unlock()
	c.budget.close()
	for _, p := range pools {
		p.Close()
	}
}

// CatalogPool is the pool on the catalog, without a schema check (init,
// which creates and migrates the catalog, uses it).
func (c *Cluster) CatalogPool(ctx context.Context) (*pgxpool.Pool, error) {
	return c.CatalogPoolAs(ctx, Session{})
}

// CatalogPoolAs is the pool of session kind s on the catalog, without a
// schema check.
func (c *Cluster) CatalogPoolAs(ctx context.Context, s Session) (*pgxpool.Pool, error) {
	p, err := c.pool(ctx, poolKey{session: s}, c.cfg.Catalog)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return p, nil
}

// Catalog is the pool on the catalog once its schema version suits use
// (checked once per use; a *shardmgr.CatalogVersionError when not). A
// server that refuses the connection is named by its own reason first
// (pg.ServerFirst), as in Map, Host and the single connections.
func (c *Cluster) Catalog(ctx context.Context, use shardmgr.SchemaUse) (*pgxpool.Pool, error) {
	p, err := c.CatalogPool(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.once(ctx, "catalog/"+strconv.Itoa(int(use)), func() error { return shardmgr.CheckCatalog(ctx, p, use) }); err != nil {
		return nil, pg.ServerFirst(err)
	}
	return p, nil
}

// Map reads the shard map from the catalog, once its schema suits use.
func (c *Cluster) Map(ctx context.Context, use shardmgr.SchemaUse) (*shardmgr.ShardMap, error) {
	p, err := c.Catalog(ctx, use)
	if err != nil {
		return nil, err
	}
	m, err := shardmgr.ReadMap(ctx, p)
	if err != nil {
		if errors.Is(err, shardmgr.ErrNotInitialized) {
			return nil, err
		}
		return nil, pg.ServerFirst(fmt.Errorf("catalog: %w", err))
	}
	return m, nil
}

// HostPool is the pool of session kind s on host name of the cluster
// file, opened on first use, without a schema check.
func (c *Cluster) HostPool(ctx context.Context, name string, s Session) (*pgxpool.Pool, error) {
	h, ok := c.cfg.Host(name)
	if !ok {
		return nil, fmt.Errorf("host %s: %w (not in the cluster file %s)", name, shardmgr.ErrUnknownHost, c.cfg.Path)
	}
	p, err := c.pool(ctx, poolKey{db: name, session: s}, h.DSN)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	return p, nil
}

// Host is the default session's pool on host name once the host's own
// schema version suits use (checked once per use). For UseWrite, the
// host's schema shardid must also pass pgtrust.Check, at every call:
// every writer of a host's records (a move, an abort, a cleanup, a
// repair) gets its pool here, and a table, trigger or grant another role
// put there, at any time in a long-lived handle's life, would run that
// role's code as the toolkit's role (*pgtrust.UntrustedError, nothing
// written).
func (c *Cluster) Host(ctx context.Context, name string, use shardmgr.SchemaUse) (*pgxpool.Pool, error) {
	p, err := c.HostPool(ctx, name, Session{})
	if err != nil {
		return nil, err
	}
	if use == shardmgr.UseWrite {
		// Before the version is read: a view planted in its place would
		// run its functions as the reader.
		if err := pgtrust.Check(ctx, p, shardschema.ToolkitSchema); err != nil {
			return nil, pg.ServerFirst(fmt.Errorf("host %s: %w", name, err))
		}
	}
	err = c.once(ctx, "host/"+name+"/"+strconv.Itoa(int(use)), func() error {
		v, err := shardmgr.ReadHostVersion(ctx, p, name)
		if err != nil {
			return err
		}
		return v.Check(use)
	})
	if err != nil {
		return nil, pg.ServerFirst(err)
	}
	return p, nil
}

// once runs check the first time key is asked for and remembers a
// verdict about the schema; a failure to reach the server is not
// remembered (the next caller tries again).
func (c *Cluster) once(ctx context.Context, key string, check func() error) error {
	c.mu.Lock()
	err, done := c.checked[key]
	c.mu.Unlock()
	if done {
		return err
	}
	err = check()
	var ve *shardmgr.CatalogVersionError
	if err == nil || errors.As(err, &ve) {
		c.mu.Lock()
		c.checked[key] = err
		c.mu.Unlock()
	}
	return err
}

// pool returns the pool for key, opening it on dsn the first time: the
// one place the handle opens pools.
func (c *Cluster) pool(ctx context.Context, key poolKey, dsn string) (*pgxpool.Pool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if p, ok := c.pools[key]; ok {
		return p, nil
	}
	cfg, err := pgsession.ParsePoolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot parse DSN: %w", err)
	}
	c.session(cfg.ConnConfig, key.session)
	cfg.MaxConns = int32(c.opts.connsPerServer)
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.budget.register(cfg, p)
	c.pools[key] = p
	return p, nil
}

// session makes cfg a connection of session kind s drawing on the
// budget: the one place the handle's connections get their settings.
func (c *Cluster) session(cfg *pgx.ConnConfig, s Session) {
	if cfg.ConnectTimeout == 0 {
		// An unreachable host is a finding, not a hang.
		cfg.ConnectTimeout = pg.DefaultConnectTimeout
	}
	rp := cfg.RuntimeParams
	if s.LockTimeout > 0 {
		rp["lock_timeout"] = strconv.FormatInt(s.LockTimeout.Milliseconds(), 10)
	}
	if s.StatementTimeout > 0 {
		rp["statement_timeout"] = strconv.FormatInt(s.StatementTimeout.Milliseconds(), 10)
	}
	if rp["application_name"] == "" {
		rp["application_name"] = cmp.Or(s.Application, c.opts.application)
	}
	// The toolkit's long work (a move's COPY and index builds, a
	// catch-up, init, migrations) must not end at a managed server's
	// statement_timeout or idle_in_transaction_session_timeout.
	pgsession.OwnTimeouts(&cfg.Config)
	c.budget.apply(&cfg.Config)
}

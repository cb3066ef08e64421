package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// Router routes application work to logical shards. It holds the map read
// from the catalog, one pgx pool per host, and reloads the map when the
// catalog's generation changes. It is safe for concurrent use.
//
// The catalog is not on the data path: when a refresh fails the router
// keeps serving from the last map it read, retries in the background with
// backoff, and refuses writes only once the map has gone unconfirmed for
// longer than WithMaxUnconfirmed (ErrMapUnconfirmed). The fences on the hosts, not
// the catalog, keep a moving shard's writes safe meanwhile.
//
// Keys map to shards by key mod shards (the key taken as an unsigned
// 64-bit number; string and byte keys by their 64-bit FNV-1a hash, see
// KeyHash), so a key's shard never changes: moving a shard moves its keys
// with it. Ids map to the shard they carry.
type Router struct {
	catalog *pgxpool.Pool
	files   map[string]Host // the cluster file's hosts (Open), by name
	opts    routerOptions

	reloadMu sync.Mutex // one reload at a time

	mu    sync.RWMutex
	m     *ShardMap
	pools map[string]*pgxpool.Pool
	// poolFor is the catalog's DSN each host's pool was opened for: a
	// host whose DSN the catalog changes gets a new pool.
	poolFor map[string]string
	checked time.Time // last time the catalog confirmed m
	// checkStart is when the check that last confirmed m began: a map
	// read after an error was seen cannot predate what caused it.
	checkStart time.Time
	health     catalogHealth
	closed     bool
	// stale holds the shards the hosts' records say the map places
	// wrongly (router_hostcheck.go), staleErr what the check found.
	stale        map[int]StaleShard
	staleErr     *CatalogStaleError
	recordWarned sync.Map // hosts whose record the router may not read, warned once
	// appRefused holds the hosts whose app_dsn reaches another database
	// than the catalog's (router_appdsn.go); appWarned the hosts whose
	// app_dsn could not be checked, warned once.
	appRefused map[string]error
	appWarned  sync.Map
	// dsnWarned: hosts whose cluster-file DSN the router does not use
	// (not the catalog's, and no app_dsn), logged once.
	dsnWarned sync.Map

	retrying atomic.Bool // a background retry of a failed refresh runs
	bgCtx    context.Context
	bgStop   context.CancelFunc
	bgWG     sync.WaitGroup
	checks   atomic.Int64 // catalog checks made (tests count them)
}

// Open opens a router on the cluster described by cfg: the map from its
// catalog, and for each host the DSN it connects to: the host's app_dsn
// from the file when it has one (Host.AppDSN: a connection pooler, say;
// never used by operator commands), checked at every new map to reach
// the database the catalog names for the host (else its shards are
// refused with ErrAppDSN); otherwise the catalog's DSN for the host,
// with the password of the file's dsn when the file names the same
// database. A pool on an app_dsn that is a connection pooler runs its
// queries unprepared (pgx.QueryExecModeExec), so that pgx's defaults work
// through PgBouncer in transaction mode (docs/poolers.md). It reads the catalog's schema version
// first and refuses one it cannot read (a *CatalogVersionError: dirty, or
// newer than this package knows and not readable by it, or older than
// CatalogSchemaRouterOldest); a catalog migrated by a newer shardid whose
// changes are additive is read (docs/upgrading.md).
func Open(ctx context.Context, cfg *Config, opts ...RouterOption) (*Router, error) {
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	files := map[string]Host{}
	for _, h := range cfg.Hosts {
		files[h.Name] = h
	}
	return open(ctx, cfg.Catalog, files, opts)
}

// OpenCatalog opens a router from the catalog alone: host DSNs are the
// ones the catalog records (see WithLookupEnv for their ${VAR}s), which
// hold no password: pgx takes it from PGPASSWORD or a passfile
// (PGPASSFILE, ~/.pgpass), or from a ${VAR} written as the password.
func OpenCatalog(ctx context.Context, catalogDSN string, opts ...RouterOption) (*Router, error) {
	return open(ctx, catalogDSN, map[string]Host{}, opts)
}

func open(ctx context.Context, catalogDSN string, files map[string]Host, opts []RouterOption) (*Router, error) {
	o, err := newRouterOptions(opts)
	if err != nil {
		return nil, err
	}
	r := &Router{files: files, pools: map[string]*pgxpool.Pool{}, poolFor: map[string]string{}, opts: o}
	r.bgCtx, r.bgStop = context.WithCancel(context.Background())
	if r.catalog, err = pg.OpenPool(ctx, catalogDSN, 2); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if _, err := r.reload(ctx); err != nil { // no map to serve from yet: fail
		r.Close()
		return nil, pg.ServerFirst(err)
	}
	return r, nil
}

// Close closes every pool. Work in flight finishes first.
func (r *Router) Close() {
	r.mu.Lock()
	pools := r.pools
	r.pools, r.closed = nil, true
	r.mu.Unlock()
	r.bgStop()
	r.bgWG.Wait()
	for _, p := range pools {
		p.Close()
	}
	r.catalog.Close()
}

// Reload reads the map from the catalog when its generation differs from
// the router's, opening pools for new hosts and for hosts whose DSN the
// catalog changed, and closing the pools of hosts that left the catalog
// or whose DSN changed (once their work in flight is done). It reports whether the map
// changed. It tries at once, whatever the backoff after failed refreshes;
// its failure (unless ctx ended) counts as one (see UnconfirmedFor).
func (r *Router) Reload(ctx context.Context) (bool, error) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	return r.check(ctx, ctx)
}

func (r *Router) reload(ctx context.Context) (bool, error) {
	gen, err := catalogGeneration(ctx, r.catalog)
	if err != nil {
		return false, err
	}
	r.mu.RLock()
	cur, closed := r.m, r.closed
	r.mu.RUnlock()
	if closed {
		return false, ErrClosed
	}
	if cur != nil && cur.Generation == gen {
		var pools map[string]*pgxpool.Pool
		r.mu.RLock()
		recheck := r.staleErr != nil
		recheckApp := len(r.appRefused) > 0
		if recheck || recheckApp {
			pools = maps.Clone(r.pools)
		}
		r.mu.RUnlock()
		var stale map[int]StaleShard
		var found *CatalogStaleError
		var refused map[string]error
		if recheckApp {
			refused = r.checkAppDSNs(ctx, cur, r.appPools(pools))
			for name := range refused {
				delete(pools, name)
			}
		}
		if recheck { // a refusal ends once the hosts agree
			stale, found = r.checkHosts(ctx, cur, pools)
		}
		r.mu.Lock()
		r.checked = time.Now()
		if recheck && r.m == cur {
			r.noteHostCheckLocked(stale, found)
		}
		if recheckApp && r.m == cur {
			r.noteAppDSNsLocked(refused)
		}
		r.mu.Unlock()
		return false, nil
	}
	// The map changed: read it only from a catalog schema this router
	// knows how to read (CheckCatalog with UseRoute). A catalog that
	// cannot be read is a failed refresh: the router keeps its last map.
	if err := CheckCatalog(ctx, r.catalog, UseRoute); err != nil {
		return false, err
	}
	m, err := ReadMap(ctx, r.catalog)
	if err != nil {
		return false, err
	}
	// The catalog is the one source of truth for hosts: a host it names
	// with a DSN the router's pool was not opened for gets a new pool; a
	// host it no longer names loses its pool.
	fresh := map[string]*pgxpool.Pool{}
	r.mu.RLock()
	for _, h := range m.Hosts {
		if _, ok := r.pools[h.Name]; !ok || r.poolFor[h.Name] != h.DSN {
			fresh[h.Name] = nil
		}
	}
	r.mu.RUnlock()
	for _, h := range m.Hosts {
		if _, want := fresh[h.Name]; !want {
			continue
		}
		p, err := r.newPool(ctx, h)
		if err != nil {
			for _, p := range fresh {
				if p != nil {
					p.Close()
				}
			}
			return false, err
		}
		fresh[h.Name] = p
	}
	// The hosts' records, against the new map, before it is routed by.
	check := map[string]*pgxpool.Pool{}
	r.mu.RLock()
	for _, h := range m.Hosts {
		if p := fresh[h.Name]; p != nil {
			check[h.Name] = p
		} else if p := r.pools[h.Name]; p != nil {
			check[h.Name] = p
		}
	}
	r.mu.RUnlock()
	// An app_dsn that reaches another database is refused first: that
	// database's record says nothing about the host.
	refused := r.checkAppDSNs(ctx, m, r.appPools(check))
	for name := range refused {
		delete(check, name)
	}
	stale, found := r.checkHosts(ctx, m, check)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, p := range fresh {
			p.Close()
		}
		return false, ErrClosed
	}
	var retired []*pgxpool.Pool
	for name, p := range fresh {
		if old, ok := r.pools[name]; ok {
			retired = append(retired, old)
		}
		r.pools[name] = p
		h, _ := m.Host(name)
		r.poolFor[name] = h.DSN
	}
	for name, p := range r.pools {
		if _, ok := m.Host(name); !ok {
			retired = append(retired, p)
			delete(r.pools, name)
			delete(r.poolFor, name)
		}
	}
	r.m, r.checked = m, time.Now()
	r.noteHostCheckLocked(stale, found)
	r.noteAppDSNsLocked(refused)
	r.retire(retired)
	return true, nil
}

// retire closes pools the map no longer routes to, in the background:
// Close waits for the connections in use, and the caller may hold one (a
// transaction that routes again from inside fn).
func (r *Router) retire(pools []*pgxpool.Pool) {
	for _, p := range pools {
		r.bgWG.Add(1)
		go func() {
			defer r.bgWG.Done()
			p.Close()
		}()
	}
}

func (r *Router) newPool(ctx context.Context, h CatalogHost) (*pgxpool.Pool, error) {
	// A host's app_dsn is the applications' way to it: used whatever the
	// catalog's DSN, and checked against the catalog's host by what the
	// database there says (checkAppDSNs). Otherwise the cluster file's
	// DSN carries the password the catalog's lacks; it is used only
	// while the catalog names the same database for the host (the
	// catalog decides where a host is).
	fh, ok := r.files[h.Name]
	dsn := fh.DSN
	app := ok && fh.AppDSN != ""
	if app {
		dsn = fh.AppDSN
	} else if !ok || fh.CatalogDSN() != h.DSN {
		if ok {
			r.fileDSNIgnored(h.Name, h.DSN)
		}
		var missing []string
		var err error
		if dsn, missing, err = expandEnv(h.DSN, r.opts.lookup); err != nil {
			return nil, fmt.Errorf("host %s: DSN: %w", h.Name, err)
		} else if len(missing) > 0 {
			return nil, fmt.Errorf("host %s: DSN needs ${%s} (see WithLookupEnv)", h.Name, missing[len(missing)-1])
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, pgsession.RedactParseError(err))
	}
	if app {
		r.adaptToPooler(ctx, h.Name, dsn, cfg)
	}
	if !dsnSets(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultHostPoolSize()
	}
	if r.opts.poolConfig != nil {
		r.opts.poolConfig(h.Name, cfg)
	}
	// After the caller's adjustments: the router's own SQL relies on them.
	pgsession.Pin(&cfg.ConnConfig.Config)
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	return p, nil
}

// DefaultHostPoolSize is the router's pool size per host unless the DSN
// says (pool_max_conns) or WithPoolConfig sets MaxConns: 8, or twice the
// machine's CPUs where that is more. pgxpool's own default, 4 on a
// 2-CPU machine, left single-statement writers queueing for a connection
// (docs/benchmarks.md#the-router-single-statements-against-a-bare-pgxpool).
func DefaultHostPoolSize() int32 { return int32(max(8, 2*runtime.NumCPU())) }

// Map returns the router's current map. Callers must not modify it.
func (r *Router) Map() *ShardMap {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m
}

// Generation is the catalog generation of the router's map.
func (r *Router) Generation() int64 { return r.Map().Generation }

// Shards is the number of logical shards.
func (r *Router) Shards() int { return len(r.Map().Shards) }

// Layout is the cluster's id layout.
func (r *Router) Layout() idgen.Layout { return r.Map().Layout }

// ShardForKey maps an application key (a user id, an account id) to its
// logical shard: key mod shards, with the key taken as an unsigned 64-bit
// number so that negative keys map too.
func (r *Router) ShardForKey(key int64) int {
	return int(uint64(key) % uint64(r.Shards()))
}

// ShardForID returns the logical shard an id was generated in, by decoding
// it with the cluster's layout; a negative id, or one carrying a shard
// outside the cluster, is ErrUnknownShard.
func (r *Router) ShardForID(id idgen.ID) (int, error) {
	m := r.Map()
	p, err := m.Layout.Decompose(id)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnknownShard, err)
	}
	s := int(p.Shard)
	if s >= len(m.Shards) {
		return 0, &ShardError{Shard: s, Err: fmt.Errorf("%w: id %d carries shard %d, the cluster has %d", ErrUnknownShard, id, s, len(m.Shards))}
	}
	return s, nil
}

// Shard returns shard id's place in the current map.
func (r *Router) Shard(id int) (Shard, error) {
	m := r.Map()
	if id < 0 || id >= len(m.Shards) {
		return Shard{}, &ShardError{Shard: id, Err: ErrUnknownShard}
	}
	s := m.Shards[id]
	return s, nil
}

// route refreshes the map when due and returns the shard and its host's
// pool; write refuses shards that are read-only or moving, and every shard
// once the map has gone unconfirmed longer than its bound.
func (r *Router) route(ctx context.Context, id int, write bool) (Shard, *pgxpool.Pool, error) {
	r.refresh(ctx)
	s, err := r.Shard(id)
	if err != nil {
		return s, nil, err
	}
	if write && s.State == StateMoving {
		// Refused by the router alone: ask the catalog soon again, not
		// at the next refresh, so that the refusal ends with the move's.
		r.refreshMoving(ctx)
		if s, err = r.Shard(id); err != nil {
			return s, nil, err
		}
	}
	if write {
		switch s.State {
		case StateReadOnly:
			return s, nil, &ShardError{Shard: id, Host: s.Host, Err: ErrShardReadOnly}
		case StateMoving:
			return s, nil, &ShardError{Shard: id, Host: s.Host, Err: ErrShardMoving}
		}
	}
	if err := r.refuseAppDSN(s); err != nil {
		return s, nil, err
	}
	if err := r.refuseStaleCatalog(s); err != nil {
		return s, nil, err
	}
	if write {
		if err := r.refuseUnconfirmed(s); err != nil {
			return s, nil, err
		}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return s, nil, ErrClosed
	}
	p, ok := r.pools[s.Host]
	if !ok {
		return s, nil, &ShardError{Shard: id, Host: s.Host, Err: ErrUnknownHost}
	}
	return s, p, nil
}

// Pool returns the pool of the host that holds shard id, for reads or for
// work the caller scopes to the shard itself (use Shard.Table). It does not
// refuse read-only or moving shards: use Tx for writes.
func (r *Router) Pool(ctx context.Context, id int) (*pgxpool.Pool, Shard, error) {
	s, p, err := r.route(ctx, id, false)
	return p, s, err
}

// Acquire returns a pooled connection to the host that holds shard id; the
// caller releases it. Like Pool, it is for reads.
func (r *Router) Acquire(ctx context.Context, id int) (*pgxpool.Conn, Shard, error) {
	s, p, err := r.route(ctx, id, false)
	if err != nil {
		return nil, s, err
	}
	c, err := p.Acquire(ctx)
	if err != nil {
		return nil, s, &ShardError{Shard: id, Host: s.Host, Err: err}
	}
	return c, s, nil
}

// Tx runs fn in a read-write transaction on the host of shard id and
// commits when fn returns nil. It refuses a shard that is read-only
// (ErrShardReadOnly) or moving (ErrShardMoving) with a *ShardError, and
// every shard with ErrMapUnconfirmed once the catalog has been unreachable
// for longer than WithMaxUnconfirmed. A state change reaches the router within
// the refresh interval, and the end of a move's refusal (the shard active
// again) within tens of milliseconds, as long as writes come: the router
// asks the catalog more often while it refuses a moving shard. Until
// then a write that reaches a fenced copy (see
// fence.SQLState), or the host a shard has moved away from, is refused with
// ErrShardMoving too (the host's error kept as its cause), and the router
// reloads its map so that a retry goes to the shard's new host.
// WithRetryMoving makes Tx retry a moving shard itself, for a bounded time.
// A shard the hosts' own records show the catalog to place wrongly (a
// catalog restored from an older backup) is refused with ErrCatalogStale
// (see CatalogStale), by ReadTx, Pool and Acquire too.
func (r *Router) Tx(ctx context.Context, id int, fn func(ctx context.Context, tx pgx.Tx, s Shard) error) error {
	return r.tx(ctx, id, true, fn)
}

// ReadTx runs fn in a read-only transaction on the host of shard id; it
// works in every state and while the catalog is unreachable. A read that
// reaches the host a shard has moved away from is ErrShardMoving, as in
// Tx.
func (r *Router) ReadTx(ctx context.Context, id int, fn func(ctx context.Context, tx pgx.Tx, s Shard) error) error {
	return r.tx(ctx, id, false, fn)
}

// txOnce runs fn once in a transaction on shard id's host.
func (r *Router) txOnce(ctx context.Context, id int, write bool, fn func(ctx context.Context, tx pgx.Tx, s Shard) error) error {
	s, p, err := r.route(ctx, id, write)
	if err != nil {
		return err
	}
	mode := pgx.ReadOnly
	if write {
		mode = pgx.ReadWrite
	}
	err = pgx.BeginTxFunc(ctx, p, pgx.TxOptions{AccessMode: mode}, func(tx pgx.Tx) error { return fn(ctx, tx, s) })
	if err != nil {
		var se *ShardError
		if errors.As(err, &se) {
			return err
		}
		return r.shardFailed(ctx, s, err)
	}
	return nil
}

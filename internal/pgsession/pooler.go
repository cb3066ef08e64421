package pgsession

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A connection pooler (PgBouncer) between the toolkit and PostgreSQL
// changes what a session can rely on. Every pooler refuses the startup
// parameters it does not know (lock_timeout, replication), so commands
// that use them need PostgreSQL itself. A pooler in transaction mode also
// hands each transaction to whichever server connection is free, so
// that nothing outlives a transaction on the client's session: named
// prepared statements (pgx's default statement cache), SET, session
// advisory locks (golang-migrate's).
//
// ProbeParam is how a pooler is told from PostgreSQL: a startup
// parameter PostgreSQL accepts (a custom placeholder setting, which no
// extension of ours reserves) and PgBouncer refuses as unsupported,
// unless someone lists it in ignore_startup_parameters, which nobody has a
// reason to.
const ProbeParam = "shardid_probe.pooler"

// unsupportedStartup is how PgBouncer refuses a startup parameter it does
// not know ("unsupported startup parameter: NAME", SQLSTATE 08P01).
const unsupportedStartup = "unsupported startup parameter"

// Pooling is what stands between a DSN and PostgreSQL.
type Pooling int

const (
	// Direct is PostgreSQL itself (or a proxy that passes every startup
	// parameter on, which behaves as PostgreSQL does).
	Direct Pooling = iota
	// SessionPooler is a pooler that keeps a client on one server
	// connection for the whole session (PgBouncer's pool_mode =
	// session), or one whose mode the probe could not tell.
	SessionPooler
	// TransactionPooler hands server connections out per transaction
	// (PgBouncer's pool_mode = transaction or statement).
	TransactionPooler
)

func (p Pooling) String() string {
	switch p {
	case SessionPooler:
		return "a connection pooler (session pooling)"
	case TransactionPooler:
		return "a connection pooler in transaction pooling mode"
	}
	return "PostgreSQL directly"
}

// DetectPooler tells whether dsn reaches PostgreSQL directly or through a
// connection pooler, and in which pooling mode: one connection with
// ProbeParam, and for a pooler two more (TransactionPooled). ctx bounds
// it; a DSN without connect_timeout waits at most timeout per connection.
func DetectPooler(ctx context.Context, dsn string, timeout time.Duration) (Pooling, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return Direct, RedactParseError(err)
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > timeout {
		cfg.ConnectTimeout = timeout
	}
	pooled, err := IsPooler(ctx, cfg)
	if err != nil || !pooled {
		return Direct, err
	}
	tx, err := TransactionPooled(ctx, cfg, timeout)
	if err != nil {
		return SessionPooler, err
	}
	if tx {
		return TransactionPooler, nil
	}
	return SessionPooler, nil
}

// IsPooler connects once with ProbeParam: PostgreSQL takes it, a pooler
// refuses it. Any other failure to connect is returned as it is.
func IsPooler(ctx context.Context, cfg *pgconn.Config) (bool, error) {
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams[ProbeParam] = "on"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(context.WithoutCancel(ctx))
		return false, nil
	}
	if IsUnsupportedStartupParameter(err) {
		return true, nil
	}
	return false, ServerFirst(err)
}

// IsUnsupportedStartupParameter reports a pooler's refusal of a startup
// parameter (PgBouncer: "unsupported startup parameter: NAME").
func IsUnsupportedStartupParameter(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Message, unsupportedStartup)
}

// TransactionPooled tells a pooler that hands server connections out per
// transaction from one that keeps a client on its server, with two
// client connections: a holds a transaction open while b asks for its
// server's pid, then a commits and b asks again. Only per-transaction
// pooling can give b a's server (a pool of one: b waited for a's commit)
// or change b's server between two statements (a's, freed last, is the
// one PgBouncer hands out next). A direct connection or session pooling
// keeps b on one server of its own. When b gets no server at all (a
// session pool that a holds alone) it is not transaction pooling.
func TransactionPooled(ctx context.Context, cfg *pgconn.Config, timeout time.Duration) (bool, error) {
	a, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer a.Close(context.WithoutCancel(ctx))
	b, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer b.Close(context.WithoutCancel(ctx))
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pidA, err := backendPID(qctx, a, "BEGIN; SELECT pg_catalog.pg_backend_pid()")
	if err != nil {
		return false, fmt.Errorf("probe for a pooler: %w", err)
	}
	type answer struct {
		pid int
		err error
	}
	first := make(chan answer, 1)
	bctx, bcancel := context.WithTimeout(ctx, timeout)
	defer bcancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pid, err := backendPID(bctx, b, "SELECT pg_catalog.pg_backend_pid()")
		first <- answer{pid, err}
	}()
	// b is closed (deferred above) only once the query is over.
	defer func() { bcancel(); <-done }()
	var b1 answer
	select {
	case b1 = <-first:
	case <-time.After(min(timeout, 2*time.Second)):
		// b waits for a server: a's, if the pooler hands it out at a's
		// commit.
	}
	if _, err := a.Exec(qctx, "COMMIT").ReadAll(); err != nil {
		return false, fmt.Errorf("probe for a pooler: %w", err)
	}
	if b1.pid == 0 && b1.err == nil {
		// Per-transaction pooling gives b a's server at its commit; a
		// session pool that a holds alone gives b nothing until a
		// leaves.
		select {
		case b1 = <-first:
		case <-time.After(min(timeout, sessionPoolWait)):
			return false, nil
		}
	}
	if b1.err != nil {
		return false, fmt.Errorf("probe for a pooler: %w", b1.err)
	}
	if b1.pid == pidA {
		return true, nil
	}
	b2, err := backendPID(qctx, b, "SELECT pg_catalog.pg_backend_pid()")
	if err != nil {
		return false, fmt.Errorf("probe for a pooler: %w", err)
	}
	return b2 != b1.pid, nil
}

// sessionPoolWait is how long TransactionPooled waits, after a's commit,
// for b to get a server before it concludes that a's session holds it.
const sessionPoolWait = 10 * time.Second

// backendPID runs sql (simple protocol, nothing prepared) and returns the
// pid its last result holds.
func backendPID(ctx context.Context, c *pgconn.PgConn, sql string) (int, error) {
	res, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		return 0, err
	}
	last := res[len(res)-1]
	if len(last.Rows) != 1 || len(last.Rows[0]) != 1 {
		return 0, errors.New("pg_backend_pid() returned no row")
	}
	return strconv.Atoi(string(last.Rows[0][0]))
}

// PoolerProbe tells, once, whether one DSN reaches a connection pooler
// (IsPooler), and remembers the answer for the life of the process: a
// pool that serves through it sets each new connection up for a pooler
// (BeforeConnect) at the cost of one probe, not one per connection. A
// probe that fails is not remembered: the next call probes again.
type PoolerProbe struct {
	cfg     *pgconn.Config
	timeout time.Duration

	mu     sync.Mutex
	known  bool
	pooled bool
}

// NewPoolerProbe probes with a copy of cfg, each probe bounded by
// timeout (and cfg's connect_timeout when shorter).
func NewPoolerProbe(cfg *pgconn.Config, timeout time.Duration) *PoolerProbe {
	c := cfg.Copy()
	if c.ConnectTimeout == 0 || c.ConnectTimeout > timeout {
		c.ConnectTimeout = timeout
	}
	return &PoolerProbe{cfg: c, timeout: timeout}
}

// Pooled reports whether the DSN reaches a connection pooler, probing
// once (one connection) until a probe answers.
func (p *PoolerProbe) Pooled(ctx context.Context) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.pooled, nil
	}
	pctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pooled, err := IsPooler(pctx, p.cfg)
	if err != nil {
		return false, err
	}
	p.known, p.pooled = true, pooled
	return pooled, nil
}

// BeforeConnect is for pgxpool.Config.BeforeConnect: on a pooler, the new
// connection runs its queries unprepared (pgx.QueryExecModeExec) unless
// its config chose another mode than pgx's default statement cache,
// whose named prepared statements a pooler in transaction mode hands to
// other clients' transactions ("prepared statement ... already exists",
// "does not exist"). A probe that cannot connect fails the connection
// with its error, as the connection itself would.
func (p *PoolerProbe) BeforeConnect(ctx context.Context, cfg *pgx.ConnConfig) error {
	pooled, err := p.Pooled(ctx)
	if err != nil {
		return err
	}
	if pooled && cfg.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	return nil
}

package migrations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/internal/pgsession"
)

// ErrPooler: the DSN of a migration run reaches a connection pooler, not
// PostgreSQL. A run holds golang-migrate's session-level advisory lock for
// its whole length and sets lock_timeout as a startup parameter: a pooler
// refuses the parameter, and one in transaction mode would hand the
// locked session's server to other clients between statements.
var ErrPooler = errors.New("the DSN reaches a connection pooler: migrations hold a session-level advisory lock (golang-migrate's) and set lock_timeout at connection start, which a pooler does not keep; give it a direct DSN to PostgreSQL")

// poolerProbeTimeout bounds the probe for a pooler before a run.
const poolerProbeTimeout = 10 * time.Second

// refusePooler refuses a cfg that reaches a connection pooler
// (pgsession.DetectPooler), naming the pooling mode; a probe that cannot
// connect is left to the run, which reports it.
func refusePooler(ctx context.Context, cfg *pgx.ConnConfig) error {
	pc := cfg.Config.Copy()
	if pc.ConnectTimeout == 0 || pc.ConnectTimeout > poolerProbeTimeout {
		pc.ConnectTimeout = poolerProbeTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, poolerProbeTimeout)
	defer cancel()
	pooled, err := pgsession.IsPooler(pctx, pc)
	if err != nil || !pooled {
		return nil
	}
	mode := pgsession.SessionPooler
	if tx, err := pgsession.TransactionPooled(pctx, pc, poolerProbeTimeout); err == nil && tx {
		mode = pgsession.TransactionPooler
	}
	return fmt.Errorf("%w (%s)", ErrPooler, mode)
}

// WithPoolerCheck lets Up run on a DSN that reaches a connection pooler,
// as far as a pooler allows: it migrates nothing there and checks, with
// plain queries that any pooling mode passes, that the database is at the
// set's latest version and clean. That holds once the database was
// migrated through a direct DSN; otherwise Up returns a *PoolerError. For
// a process that uses a database through a pooler (serve's sources and
// lease database). Without it, a pooler is refused (ErrPooler).
func WithPoolerCheck() Option { return func(o *options) error { o.poolerCheck = true; return nil } }

// PoolerError: Up with WithPoolerCheck reached a connection pooler and the
// database is not at the set's latest version (or a migration failed half
// way there): migrations do not run through a pooler.
type PoolerError struct {
	Set      string
	Database string
	Table    string // the set's version table, schema-qualified
	Version  uint   // applied; 0 when none
	Dirty    bool
	Latest   uint // this binary's
}

func (e *PoolerError) Error() string {
	state := fmt.Sprintf("is at version %d", e.Version)
	if e.Dirty {
		state += " (dirty: a migration failed half way)"
	}
	return fmt.Sprintf("%s migrations on %s: the DSN reaches a connection pooler, which does not keep golang-migrate's session-level advisory lock, so nothing is migrated through it, and %s %s where this binary needs version %d: migrate it once through a direct DSN to PostgreSQL",
		e.Set, e.Database, e.Table, state, e.Latest)
}

func (e *PoolerError) Unwrap() error { return ErrPooler }

// checkThroughPooler is Up's way on a pooler (WithPoolerCheck): it reports
// whether cfg reaches one (a probe that fails is left to the run, which
// reports the failure) and, if so, whether the database is migrated.
func checkThroughPooler(ctx context.Context, cfg *pgx.ConnConfig, set Set) (pooled bool, err error) {
	pc := cfg.Config.Copy()
	if pc.ConnectTimeout == 0 || pc.ConnectTimeout > poolerProbeTimeout {
		pc.ConnectTimeout = poolerProbeTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, poolerProbeTimeout)
	defer cancel()
	if pooled, err := pgsession.IsPooler(pctx, pc); err != nil || !pooled {
		return false, nil
	}
	latest, err := set.Latest()
	if err != nil {
		return true, err
	}
	cc := cfg.Copy()
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec // nothing prepared by name
	if cc.ConnectTimeout == 0 || cc.ConnectTimeout > poolerProbeTimeout {
		cc.ConnectTimeout = poolerProbeTimeout
	}
	conn, err := pgx.ConnectConfig(pctx, cc)
	if err != nil {
		return true, pgsession.ServerFirst(fmt.Errorf("%s migrations on %s: %w", set.Name, cfg.Database, err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	table := pgx.Identifier{Schema, set.Table}.Sanitize()
	e := &PoolerError{Set: set.Name, Database: cfg.Database, Table: Schema + "." + set.Table, Latest: latest}
	var version int64
	err = conn.QueryRow(pctx, "SELECT current_database(), version, dirty FROM "+table).Scan(&e.Database, &version, &e.Dirty)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pe) && pe.Code == pgerrcode.UndefinedTable:
		return true, e
	case err != nil:
		return true, fmt.Errorf("%s migrations on %s: read %s: %w", set.Name, cfg.Database, e.Table, err)
	}
	e.Version = uint(max(version, 0))
	if e.Version == latest && !e.Dirty {
		return true, nil
	}
	return true, e
}

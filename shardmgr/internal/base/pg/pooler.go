package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/internal/pgsession"
)

// ErrPooler is an operator's DSN that reaches a connection pooler
// (PgBouncer) instead of PostgreSQL. The toolkit's own sessions need
// PostgreSQL itself: a pooler refuses the startup parameters they use
// (lock_timeout, a move's replication connection) and, pooling per
// transaction, drops their session state (advisory locks, prepared
// statements). A pooler is the applications' way in: a host's app_dsn.
var ErrPooler = errors.New("the DSN reaches a connection pooler, not PostgreSQL: operators' connections need PostgreSQL itself; a pooler is the applications' way in (the host's app_dsn)")

// RefusePooler returns an error wrapping ErrPooler when dsn reaches a
// connection pooler (pgsession.IsPooler: one connection, at most timeout).
// A DSN that does not parse or does not answer is not judged here (nil):
// the caller's own connection reports it.
func RefusePooler(ctx context.Context, dsn string, timeout time.Duration) error {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > timeout {
		cfg.ConnectTimeout = timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pooled, err := pgsession.IsPooler(ctx, cfg)
	if err != nil || !pooled {
		return nil
	}
	return ErrPooler
}

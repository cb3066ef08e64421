package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// ServerIdentity is what a PostgreSQL server says about which cluster of
// data files it runs: a primary and every standby made from it by
// pg_basebackup share SystemIdentifier; a promotion starts a new
// Timeline.
type ServerIdentity struct {
	// SystemIdentifier is pg_control_system().system_identifier as
	// decimal text (it is a uint64 that PostgreSQL shows as bigint).
	SystemIdentifier string
	// Timeline is the WAL timeline the server writes on (a primary) or
	// last replayed a checkpoint of (a standby).
	Timeline int64
	// InRecovery: the server is a standby (or still recovering).
	InRecovery bool
	// Now is the server's clock_timestamp() when it answered.
	Now time.Time
}

// ErrIdentityDenied is a server that does not let this role read
// pg_control_system() (PUBLIC may by default since PostgreSQL 10; a
// hardened server may REVOKE it: GRANT EXECUTE ON FUNCTION
// pg_control_system() to the manager's role).
var ErrIdentityDenied = errors.New("this role may not read the server's identity (pg_control_system())")

// serverIdentitySQL reads the identity in one statement. A primary's
// timeline is the one its current WAL file is named for (exact right
// after a promotion, before the end-of-recovery checkpoint); a standby's
// is its last checkpoint's (pg_walfile_name fails during recovery, and
// CASE keeps it from running there).
const serverIdentitySQL = `SELECT s.system_identifier::text, r.rec,
	CASE WHEN r.rec THEN (SELECT c.timeline_id::bigint FROM pg_catalog.pg_control_checkpoint() c)
	     ELSE ('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END,
	pg_catalog.clock_timestamp()
FROM pg_catalog.pg_control_system() s, (SELECT pg_catalog.pg_is_in_recovery() AS rec) r`

// ReadServerIdentity asks the server q is connected to who it is.
func ReadServerIdentity(ctx context.Context, q Querier) (ServerIdentity, error) {
	var id ServerIdentity
	err := q.QueryRow(ctx, serverIdentitySQL).Scan(&id.SystemIdentifier, &id.InRecovery, &id.Timeline, &id.Now)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgerrcode.InsufficientPrivilege {
		return id, fmt.Errorf("%w: %s", ErrIdentityDenied, pe.Message)
	}
	if err != nil {
		return id, fmt.Errorf("read the server's identity: %w", err)
	}
	return id, nil
}

// ClockAhead is how far a server's clock, which answered server to a
// query sent at t0 on ours, may be ahead of ours: server - t0, an upper
// bound (the answer came after t0), 0 when not ahead. A bound on ids
// uses the upper bound.
func ClockAhead(t0, server time.Time) time.Duration {
	return max(server.Sub(t0), 0)
}

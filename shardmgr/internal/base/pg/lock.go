package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// LockHolder is a session holding a lock that someone waits for (or may):
// what pg_locks and pg_stat_activity say of it.
type LockHolder struct {
	// Key is the second key of an advisory lock taken with two int4 keys
	// (objid in pg_locks); 0 for other locks.
	Key          int64
	Exclusive    bool
	PID          int32
	Role, App    string
	State        string
	StateChange  *time.Time
	BackendStart *time.Time
}

func (h LockHolder) String() string {
	var b strings.Builder
	role := h.Role
	if role == "" {
		role = "unknown"
	}
	fmt.Fprintf(&b, "session pid %d (role %s, application %q", h.PID, role, h.App)
	if h.State != "" {
		fmt.Fprintf(&b, ", %s", h.State)
		if h.StateChange != nil {
			fmt.Fprintf(&b, " since %s", h.StateChange.UTC().Format(time.RFC3339))
		}
	}
	if h.BackendStart != nil {
		fmt.Fprintf(&b, ", connected %s", h.BackendStart.UTC().Format(time.RFC3339))
	}
	b.WriteString(")")
	return b.String()
}

const holderColumns = `a.pid, coalesce(a.usename::text, ''), coalesce(a.application_name, ''), coalesce(a.state, ''), a.state_change, a.backend_start`

// AdvisoryHolders lists the sessions other than the caller's that hold the
// advisory lock (key1, key2) taken with two int4 keys in the database q is
// connected to; key2 < 0 means any second key. Such locks appear in
// pg_locks as classid = key1, objid = key2, objsubid = 2.
func AdvisoryHolders(ctx context.Context, q Querier, key1, key2 int64) ([]LockHolder, error) {
	rows, err := q.Query(ctx, `SELECT l.objid::bigint, l.mode = 'ExclusiveLock', `+holderColumns+`
		FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::bigint::oid AND l.objsubid = 2
		  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		  AND a.pid <> pg_catalog.pg_backend_pid() AND ($2::bigint < 0 OR l.objid = $2::bigint::oid)
		ORDER BY 1, 3`, key1, key2)
	if err != nil {
		return nil, fmt.Errorf("read advisory locks: %w", err)
	}
	var out []LockHolder
	var h LockHolder
	_, err = pgx.ForEachRow(rows, []any{&h.Key, &h.Exclusive, &h.PID, &h.Role, &h.App, &h.State, &h.StateChange, &h.BackendStart}, func() error {
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read advisory locks: %w", err)
	}
	return out, nil
}

// TableLockHolders lists the sessions other than the caller's that hold a
// lock on table (a name to_regclass reads) stronger than a plain read's:
// the locks that writers, row locks (SELECT ... FOR UPDATE) and DDL take,
// which a writer of the table may wait for.
func TableLockHolders(ctx context.Context, q Querier, table string) ([]LockHolder, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (a.pid) l.mode IN ('ExclusiveLock', 'AccessExclusiveLock'), `+holderColumns+`
		FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'relation' AND l.granted AND l.relation = pg_catalog.to_regclass($1)
		  AND l.mode <> 'AccessShareLock' AND a.pid <> pg_catalog.pg_backend_pid()
		ORDER BY a.pid, 1 DESC`, table)
	if err != nil {
		return nil, fmt.Errorf("read locks on %s: %w", table, err)
	}
	out, err := collectHolders(rows)
	if err != nil {
		return nil, fmt.Errorf("read locks on %s: %w", table, err)
	}
	return out, nil
}

// SchemaLockHolders lists the sessions other than the caller's that hold
// a lock on a table (or index, or sequence) of schema: the sessions DDL on
// the schema's tables (which conflicts even with a plain read's lock) may
// wait for.
func SchemaLockHolders(ctx context.Context, q Querier, schema string) ([]LockHolder, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (a.pid) l.mode IN ('ExclusiveLock', 'AccessExclusiveLock'), `+holderColumns+`
		FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		JOIN pg_catalog.pg_class c ON c.oid = l.relation
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE l.locktype = 'relation' AND l.granted AND n.nspname = $1
		  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		  AND a.pid <> pg_catalog.pg_backend_pid()
		ORDER BY a.pid, 1 DESC`, schema)
	if err != nil {
		return nil, fmt.Errorf("read locks in %s: %w", schema, err)
	}
	out, err := collectHolders(rows)
	if err != nil {
		return nil, fmt.Errorf("read locks in %s: %w", schema, err)
	}
	return out, nil
}

// ErrLockWait is what every *LockWaitError wraps: a bounded wait for a
// lock ran out.
var ErrLockWait = errors.New("gave up waiting for a lock")

// LockWaitError is a wait for a lock that ran out: what was waited for,
// how long, and who held it when the wait gave up.
type LockWaitError struct {
	// What names the lock ("the catalog's init lock").
	What   string
	Waited time.Duration
	// Holders are the sessions holding the lock when the wait gave up
	// (none: it was let go meanwhile); HoldersErr is why they are unknown.
	Holders    []LockHolder
	HoldersErr error
}

func (e *LockWaitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gave up after %s waiting for %s", e.Waited.Round(time.Millisecond), e.What)
	switch {
	case e.HoldersErr != nil:
		fmt.Fprintf(&b, " (who holds it is unknown: %s)", OneLine(e.HoldersErr))
	case len(e.Holders) == 0:
		b.WriteString(" (no session holds it now)")
	default:
		parts := make([]string, len(e.Holders))
		for i, h := range e.Holders {
			parts[i] = h.String()
		}
		fmt.Fprintf(&b, ": held by %s", strings.Join(parts, "; "))
	}
	return b.String()
}

func (e *LockWaitError) Unwrap() error { return ErrLockWait }

// IsLockTimeout reports a statement cancelled by lock_timeout.
func IsLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.LockNotAvailable
}

// LockWaitFailed is the *LockWaitError of a wait for what that began at
// start and ran out, with its holders as holders reads them (on a session
// of its own: the waiting one is in an aborted transaction). Bounded: a
// holder that cannot be read within 5 seconds is reported unknown.
func LockWaitFailed(ctx context.Context, what string, start time.Time, holders func(ctx context.Context) ([]LockHolder, error)) *LockWaitError {
	e := &LockWaitError{What: what, Waited: time.Since(start)}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	e.Holders, e.HoldersErr = holders(hctx)
	return e
}

// collectHolders reads the rows of a query selecting whether the lock is
// exclusive, then holderColumns.
func collectHolders(rows pgx.Rows) ([]LockHolder, error) {
	var out []LockHolder
	var h LockHolder
	_, err := pgx.ForEachRow(rows, []any{&h.Exclusive, &h.PID, &h.Role, &h.App, &h.State, &h.StateChange, &h.BackendStart}, func() error {
		out = append(out, h)
		return nil
	})
	return out, err
}

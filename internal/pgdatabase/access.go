package pgdatabase

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Querier is what the checks here need of a connection: a *pgx.Conn,
// *pgxpool.Pool or pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// PublicCanConnect reports whether PUBLIC (every role, present and
// future) holds CONNECT on the database named db, which it does unless
// someone revoked it: PostgreSQL grants it by default. Advisory locks are
// one namespace per database and need nothing beyond CONNECT, so any role
// that can connect to a database the toolkit coordinates through (the
// catalog, a lease or segment database) can hold a lock the toolkit
// waits for.
func PublicCanConnect(ctx context.Context, q Querier, db string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `
SELECT EXISTS (
    SELECT FROM pg_database d, aclexplode(COALESCE(d.datacl, acldefault('d', d.datdba))) a
    WHERE d.datname = $1 AND a.grantee = 0 AND a.privilege_type = 'CONNECT')`, db).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read the privileges of database %s: %w", db, err)
	}
	return ok, nil
}

// LockHolder is a session holding (or waiting for) a lock, as pg_locks
// and pg_stat_activity describe it.
type LockHolder struct {
	PID         int32
	Role        string
	Application string
	Granted     bool
}

func (h LockHolder) String() string {
	app := h.Application
	if app == "" {
		app = "(none)"
	}
	return fmt.Sprintf("pid %d, role %s, application %s", h.PID, h.Role, app)
}

// AdvisoryLockHolders returns the sessions other than the caller's that
// hold the session- or transaction-level advisory lock key (the bigint
// form, pg_advisory_lock(key)) in the current database.
func AdvisoryLockHolders(ctx context.Context, q Querier, key int64) ([]LockHolder, error) {
	rows, err := q.Query(ctx, `
SELECT l.pid, COALESCE(a.usename::text, ''), COALESCE(a.application_name, ''), l.granted
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid AND l.objsubid = 1
  AND l.granted AND l.pid <> pg_backend_pid()
ORDER BY l.pid`, key)
	if err != nil {
		return nil, fmt.Errorf("read the holders of advisory lock %d: %w", key, err)
	}
	holders, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LockHolder, error) {
		var h LockHolder
		return h, r.Scan(&h.PID, &h.Role, &h.Application, &h.Granted)
	})
	if err != nil {
		return nil, fmt.Errorf("read the holders of advisory lock %d: %w", key, err)
	}
	return holders, nil
}

// Holders joins holders for a message: "pid 12, role app, application psql".
func Holders(holders []LockHolder) string {
	if len(holders) == 0 {
		return "nobody any more"
	}
	s := make([]string, len(holders))
	for i, h := range holders {
		s[i] = h.String()
	}
	return strings.Join(s, "; ")
}

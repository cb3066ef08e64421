package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/pgsession"
)

// DefaultConnectTimeout bounds a connection attempt whose DSN sets no
// connect_timeout: an unreachable host is a finding, not a hang. It is
// long enough for a server that is busy rather than gone: a new backend
// on a loaded machine can take seconds to start.
const DefaultConnectTimeout = 30 * time.Second

// Querier is a pool, connection or transaction that runs queries.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Execer also runs statements.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Querier
}

// WithLockRetry runs fn in a transaction on pool with a short lock_timeout,
// retrying when it times out or is chosen as a deadlock victim: DDL on a
// busy shard queues behind open transactions, and every writer queues
// behind it; a short wait retried keeps writers from stalling long.
func WithLockRetry(ctx context.Context, db TxBeginner, lockTimeout time.Duration, tries int, fn func(tx pgx.Tx) error) error {
	var err error
	for i := range tries {
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, lockTimeout.Milliseconds())); err != nil {
				return err
			}
			return fn(tx)
		})
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || (pe.Code != pgerrcode.LockNotAvailable && pe.Code != pgerrcode.DeadlockDetected) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * 20 * time.Millisecond):
		}
	}
	return err
}

// WithTablesIdle runs fn once no VACUUM or ANALYZE is working on a table
// of schema (waiting at most a minute): DDL on a table queues behind them
// and every writer queues behind the DDL, and autovacuum gives way only to
// a lock wait longer than deadlock_timeout.
func WithTablesIdle(ctx context.Context, db Querier, schema string, fn func() error) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var busy int
		err := db.QueryRow(ctx, `SELECT count(*) FROM (SELECT relid FROM pg_catalog.pg_stat_progress_vacuum
				UNION ALL SELECT relid FROM pg_catalog.pg_stat_progress_analyze) p
			JOIN pg_catalog.pg_class c ON c.oid = p.relid
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1`, schema).Scan(&busy)
		if err != nil {
			return err
		}
		if busy == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fn()
}

// TxBeginner is a pool or connection that begins transactions.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// OneLine is err on one line: a server error as its message and SQLSTATE.
func OneLine(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message + " (SQLSTATE " + pe.Code + ")"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// QuoteLiteral quotes s as an SQL string literal that reads the same
// whatever standard_conforming_strings says (sessions pin it on, see
// package pgsession; this holds without that too): an escape string
// (E'...') with backslashes and quotes doubled, as PostgreSQL's
// quote_literal writes it.
// A NUL byte, which no PostgreSQL text holds, ends the statement inside
// the literal: an error, never SQL of its own.
func QuoteLiteral(s string) string {
	return "E'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

// IsUniqueViolation reports a unique_violation.
func IsUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.UniqueViolation
}

// IsUndefinedTable reports a missing table or schema.
func IsUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == pgerrcode.UndefinedTable || pe.Code == pgerrcode.InvalidSchemaName)
}

// ResetAll is the SQL that resets a session's settings while keeping
// the timeouts the toolkit pinned (pgsession.ResetAll).
func ResetAll(pc *pgconn.PgConn, cfg *pgconn.Config) string { return pgsession.ResetAll(pc, cfg) }

// Connect opens one connection on dsn, with the session settings the
// toolkit relies on pinned (package pgsession).
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) { return pgsession.Connect(ctx, dsn) }

// OpenPool opens a pool on dsn with at most maxConns connections, with
// the session settings the toolkit relies on pinned (package pgsession).
func OpenPool(ctx context.Context, dsn string, maxConns int) (*pgxpool.Pool, error) {
	cfg, err := pgsession.ParsePoolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot parse DSN: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// An unreachable host is a finding, not a hang (connect_timeout in
		// the DSN overrides this).
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// DatabaseKey names the database a DSN points at (host:port/database; a
// DSN naming several servers lists them all, as Servers does), so that two
// spellings of one database count as duplicates.
func DatabaseKey(dsn string) (string, error) {
	if err := pgsession.CheckScheme(dsn); err != nil {
		return "", err
	}
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	return Servers(pc) + "/" + pc.Database, nil
}

// ErrorText is err's message, "" for nil: how results marshal the error
// they carry to JSON.
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ServerFirst puts the server's own reason first in a failed connection's
// error (pgsession.ServerFirst): with sslmode=prefer a refusal reads
// "server refused TLS connection" before the server's FATAL.
func ServerFirst(err error) error { return pgsession.ServerFirst(err) }

// OnHost is err with "host NAME: " in front, unless its message begins
// with that already (the cluster's pools and the schema checks name the
// host themselves): a wrap must not say "host pg2: host pg2: ...".
func OnHost(name string, err error) error {
	if err == nil || strings.HasPrefix(err.Error(), "host "+name+": ") {
		return err
	}
	return fmt.Errorf("host %s: %w", name, err)
}

// NotAnswering reports an error that says the server did not answer,
// rather than refused what was asked: a connection the network refused,
// reset or timed out, a session the server ended by shutting down, or a
// server starting up or shutting down (cannot_connect_now). A server that
// restarts gives these for a while; a wait for it may try again.
// Authentication, privileges and every other server error are answers.
func NotAnswering(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow:
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

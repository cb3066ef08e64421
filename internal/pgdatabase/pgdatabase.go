// Package pgdatabase creates the database a DSN names when it is missing,
// and digs the server's own error out of a failed connection attempt.
//
// init creates the cluster's databases and serve its segment sources'; both
// need the same few steps: connect, and on invalid_catalog_name connect to
// the postgres database of the same server and CREATE DATABASE, taking a
// concurrent creator's success as ours.
package pgdatabase

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/internal/pgsession"
)

// Ensure connects to dsn and, when its database does not exist, creates it
// through the postgres database of the same server. It reports whether it
// created the database. Losing a race with another creator is not an
// error. A failed connection's error puts the server's message first (see
// Explain).
func Ensure(ctx context.Context, dsn string) (created bool, err error) {
	cfg, err := pgsession.ParseConfig(dsn)
	if err != nil {
		return false, err // says "cannot parse the DSN", without the DSN
	}
	return EnsureConfig(ctx, cfg)
}

// EnsureConfig is Ensure for the database cfg names, connecting with
// cfg's dial and settings (the postgres database through a copy of cfg),
// one connection at a time.
func EnsureConfig(ctx context.Context, cfg *pgx.ConnConfig) (created bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return false, conn.Close(ctx)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.InvalidCatalogName {
		return false, fmt.Errorf("connect to %s: %w", cfg.Database, Explain(err))
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return false, fmt.Errorf("database %s is missing and the postgres database is unreachable to create it: %w", cfg.Database, Explain(err))
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	// Another creator was first: it committed before we looked
	// (duplicate_database), or while we were creating ours (the unique
	// index on pg_database's names).
	if errors.As(err, &pe) && (pe.Code == pgerrcode.DuplicateDatabase ||
		(pe.Code == pgerrcode.UniqueViolation && pe.ConstraintName == "pg_database_datname_index")) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create database %s: %w", cfg.Database, err)
	}
	return true, nil
}

// Explain returns err with the server's own message first when err holds
// one. With sslmode=prefer (libpq's default, and pgx's) a failed
// connection's text starts with the first attempt's "tls error: server
// refused TLS connection", and the reason that matters (database "seg"
// does not exist, password authentication failed) comes last, if it is
// read at all. The returned error wraps err.
func Explain(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	return &explained{cause: pe, err: err}
}

type explained struct {
	cause *pgconn.PgError
	err   error
}

func (e *explained) Error() string {
	return fmt.Sprintf("%s (SQLSTATE %s); in full: %v", e.cause.Message, e.cause.Code, e.err)
}

func (e *explained) Unwrap() error { return e.err }

// Package pgdatabase creates the database a DSN names when it is missing.
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
// error. A failed connection's error puts the server's reason first
// (pgsession.ServerFirst).
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
		return false, fmt.Errorf("connect to %s: %w", cfg.Database, pgsession.ServerFirst(err))
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return false, fmt.Errorf("database %s is missing and the postgres database is unreachable to create it: %w", cfg.Database, pgsession.ServerFirst(err))
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

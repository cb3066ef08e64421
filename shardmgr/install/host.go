package install

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/shardid/shardid/internal/pgsession"
)

// ensureDatabase connects to dsn and, when its database does not exist,
// creates it from the server's postgres database. It reports whether it
// created the database.
func ensureDatabase(ctx context.Context, dsn string) (bool, error) {
	cfg, err := pgsession.ParseConfig(dsn)
	if err != nil {
		return false, fmt.Errorf("cannot parse DSN: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return false, conn.Close(ctx)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.InvalidCatalogName {
		return false, fmt.Errorf("connect to %s: %w", cfg.Database, err)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return false, fmt.Errorf("database %s is missing and the postgres database is unreachable to create it: %w", cfg.Database, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	// Another manager was first: it committed before we looked
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

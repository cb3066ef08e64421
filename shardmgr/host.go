package shardmgr

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/migrations"
)

//go:embed hostschema/*.sql
var hostSchemaFiles embed.FS

// HostSchema is the migration set of a host database's own record
// (shardid.host_info, shardid.local_shards).
var HostSchema = migrations.Set{Name: "host", FS: hostSchemaFS(), Table: "host_migrations"}

func hostSchemaFS() fs.FS {
	sub, err := fs.Sub(hostSchemaFiles, "hostschema")
	if err != nil {
		panic(err)
	}
	return sub
}

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
	if !errors.As(err, &pe) || pe.Code != "3D000" { // invalid_catalog_name
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

// connect opens one connection on dsn, with the session settings the
// toolkit relies on pinned (package pgsession).
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) { return pgsession.Connect(ctx, dsn) }

// openPool opens a pool on dsn with at most maxConns connections, with
// the session settings the toolkit relies on pinned (package pgsession).
func openPool(ctx context.Context, dsn string, maxConns int) (*pgxpool.Pool, error) {
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
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

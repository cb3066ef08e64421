package shardmgr

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// The schema versions this binary knows. They are the highest migration
// numbers of migrations.Catalog and migrations.Host (a test holds them
// equal); the root keeps them as constants so that an application's
// router links no golang-migrate. docs/upgrading.md has the policy.
const (
	// CatalogSchema is the catalog schema version this binary reads and
	// writes.
	CatalogSchema = 19
	// CatalogSchemaRouterOldest is the oldest catalog schema the Router
	// reads: it needs only the tables of migration 1 (cluster, hosts,
	// shards).
	CatalogSchemaRouterOldest = 1
	// catalogReadersSchema is the migration that added
	// shardid.catalog_readers.
	catalogReadersSchema = 12
	// HostSchema is the version of a host database's own record
	// (shardid.host_info, shardid.local_shards) this binary writes.
	HostSchema = 2
)

// golang-migrate's version tables (migrations.Catalog.Table and
// migrations.Host.Table).
const (
	catalogVersionTable = "catalog_migrations"
	hostVersionTable    = "host_migrations"
)

// SchemaUse is what a caller will do with a database whose schema version
// it checks; it decides which versions other than its own it accepts.
type SchemaUse int

const (
	// UseWrite: the caller writes (init, migrate, rebalance). Only the
	// schema version this binary knows will do.
	UseWrite SchemaUse = iota
	// UseRead: the caller only reads (status, verify, plans, journals).
	// A newer catalog will do while it says binaries of this version may
	// still read it (its min_reader marker, docs/upgrading.md).
	UseRead
	// UseRoute: the Router. As UseRead, and an older catalog will do down
	// to CatalogSchemaRouterOldest, so routers work while operators have
	// not yet run init with a newer binary.
	UseRoute
)

// SchemaVersion is what a database says about one of shardid's schemas:
// golang-migrate's version and dirty flag, and for the catalog the oldest
// schema version whose binaries may still read it.
type SchemaVersion struct {
	// Schema is "catalog" or "host".
	Schema string
	// Host names the host database for Schema "host".
	Host string
	// Have is the version the database was migrated to; 0 when never.
	Have int64
	// Dirty is golang-migrate's flag: migration Have failed half way.
	Dirty bool
	// MinReader is read from a catalog newer than this binary: readers
	// that know at least this version may read it. 0 when not read.
	MinReader int64
}

// CatalogVersionError is a database whose schema version this binary
// must not use as asked. It wraps ErrCatalogDirty, ErrCatalogTooNew or
// ErrCatalogTooOld (for a host's schema as well as for the catalog).
type CatalogVersionError struct {
	SchemaVersion
	// Want is the version this binary knows.
	Want int64
}

func (e *CatalogVersionError) where() string {
	if e.Schema == "host" {
		return fmt.Sprintf("host %s's shardid schema", e.Host)
	}
	return "this catalog"
}

func (e *CatalogVersionError) Error() string {
	switch {
	case e.Dirty:
		return fmt.Sprintf("%s is dirty at schema %d: migration %d failed half way; this binary knows %d", e.where(), e.Have, e.Have, e.Want)
	case e.Have > e.Want:
		return fmt.Sprintf("%s was upgraded to schema %d by a newer shardid; this binary knows %d", e.where(), e.Have, e.Want)
	default:
		return fmt.Sprintf("%s is at schema %d; this binary needs %d", e.where(), e.Have, e.Want)
	}
}

func (e *CatalogVersionError) Unwrap() error {
	switch {
	case e.Dirty:
		return ErrCatalogDirty
	case e.Have > e.Want:
		return ErrCatalogTooNew
	default:
		return ErrCatalogTooOld
	}
}

// ReadCatalogVersion reads the catalog's schema version with plain SQL
// (golang-migrate's version table; a catalog never migrated is version
// 0). It writes nothing.
func ReadCatalogVersion(ctx context.Context, q Querier) (SchemaVersion, error) {
	v := SchemaVersion{Schema: "catalog"}
	var err error
	if v.Have, v.Dirty, err = readVersionTable(ctx, q, catalogVersionTable); err != nil {
		return v, pg.ServerFirst(fmt.Errorf("catalog: read schema version: %w", err))
	}
	// Read by every binary that knows the marker, whatever the version:
	// a role that may not read it finds out now, not on the day the
	// catalog is upgraded past this binary (docs/upgrading.md).
	if v.Have >= catalogReadersSchema && !v.Dirty {
		err := q.QueryRow(ctx, `SELECT min_reader FROM shardid.catalog_readers`).Scan(&v.MinReader)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err):
			v.MinReader = v.Have // no marker: only its own version reads it
		case err != nil:
			return v, pg.ServerFirst(fmt.Errorf("catalog: read shardid.catalog_readers (who may read this catalog): %w", err))
		}
	}
	return v, nil
}

// ReadHostVersion reads the schema version of host's own record in the
// host database q, as ReadCatalogVersion does.
func ReadHostVersion(ctx context.Context, q Querier, host string) (SchemaVersion, error) {
	v := SchemaVersion{Schema: "host", Host: host}
	var err error
	if v.Have, v.Dirty, err = readVersionTable(ctx, q, hostVersionTable); err != nil {
		return v, pg.ServerFirst(fmt.Errorf("host %s: read schema version: %w", host, err))
	}
	return v, nil
}

func readVersionTable(ctx context.Context, q Querier, table string) (version int64, dirty bool, err error) {
	err = q.QueryRow(ctx, `SELECT version, dirty FROM `+pgx.Identifier{"shardid", table}.Sanitize()+` LIMIT 1`).Scan(&version, &dirty)
	if errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err) {
		return 0, false, nil
	}
	return version, dirty, err
}

// Check says whether this binary may use a database at version v as use
// says (a *CatalogVersionError when not). A database never migrated (Have
// 0) passes: the caller finds it empty (ErrNotInitialized) or creates it.
func (v SchemaVersion) Check(use SchemaUse) error {
	want := int64(CatalogSchema)
	if v.Schema == "host" {
		want = HostSchema
	}
	ok := false
	switch {
	case v.Dirty:
	case v.Have == 0 || v.Have == want:
		ok = true
	case v.Have > want:
		ok = use != UseWrite && v.Schema == "catalog" && v.MinReader <= want
	default:
		ok = use == UseRoute && v.Schema == "catalog" && v.Have >= CatalogSchemaRouterOldest
	}
	if ok {
		return nil
	}
	return &CatalogVersionError{SchemaVersion: v, Want: want}
}

// CheckCatalog reads the catalog's schema version from q and checks it for
// use: the one call every command that opens a catalog makes first.
func CheckCatalog(ctx context.Context, q Querier, use SchemaUse) error {
	v, err := ReadCatalogVersion(ctx, q)
	if err != nil {
		return err
	}
	return v.Check(use)
}

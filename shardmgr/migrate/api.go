package migrate

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	sm "github.com/shardid/shardid/shardmgr/internal/shardmigrate"
)

// The engine lives in shardmgr/internal/shardmigrate, below install,
// verify, migrate and rebalance, so that those siblings share it without
// importing one another; this file is the operators' face of it. Every
// name here is the engine's own (aliases and one-line forwards): the
// documentation of each is in the engine.

// Direction of a migration run.
type Direction = sm.Direction

// Directions.
const (
	Up   Direction = sm.Up
	Down Direction = sm.Down
)

// Tables a migrated shard keeps in its own schema.
const (
	// VersionTable is tern's version table, <schema>.schema_version
	// (version int4 not null, one row), so the plain tern CLI agrees on
	// the version: tern migrate --version-table shard_0005.schema_version.
	VersionTable = sm.VersionTable
	// FailureTable holds at most one row: the last migration that failed
	// on the shard, or a disable-tx migration that is running or was
	// interrupted. A successful step removes it.
	FailureTable = sm.FailureTable
)

// Formats that WriteRendered can write.
const (
	// FormatTern writes NNN_name.sql files: up SQL, the tern separator,
	// down SQL. The plain tern CLI applies them with
	// --version-table <schema>.schema_version.
	FormatTern = sm.FormatTern
	// FormatGolangMigrate writes NNN_name.up.sql and NNN_name.down.sql,
	// which golang-migrate's migrate CLI applies.
	FormatGolangMigrate = sm.FormatGolangMigrate
)

// Defaults and limits.
const (
	// DefaultGeneratorLockTimeout bounds the wait for the write lock on a
	// shard's tables unless GeneratorOptions.LockTimeout says.
	DefaultGeneratorLockTimeout = sm.DefaultGeneratorLockTimeout
	// DefaultShardLockWait is how long a run waits, by default, for another
	// session holding a shard's migration lock.
	DefaultShardLockWait = sm.DefaultShardLockWait
	// DefaultMigrateWorkers is the number of connections per host that
	// migrate shards in parallel when Options.Workers is zero.
	DefaultMigrateWorkers = sm.DefaultMigrateWorkers
	// MaxMigrationFileSize is the largest migration or template file a
	// MigrationSet reads: 8 MiB.
	MaxMigrationFileSize = sm.MaxMigrationFileSize
)

// Sentinel errors of the package (the engine's own values); test with
// errors.Is. They say what went wrong, never which command to run next.
var (
	// ErrShardSchemaMissing: the shard's schema is not on its host.
	ErrShardSchemaMissing = sm.ErrShardSchemaMissing
	// ErrIrreversible: a migration to undo has no down SQL.
	ErrIrreversible = sm.ErrIrreversible
	// ErrNoGenerator: a shard has no next_id() to upgrade.
	ErrNoGenerator = sm.ErrNoGenerator
	// ErrForeignGenerator: a shard's next_id() is not one shardid can upgrade.
	ErrForeignGenerator = sm.ErrForeignGenerator
	// ErrGeneratorTooNew: a shard's next_id() was installed by a newer
	// shardid than this one; it is left as it is.
	ErrGeneratorTooNew = sm.ErrGeneratorTooNew
	// ErrMigrationSet is wrapped by every error about a migrations directory.
	ErrMigrationSet = sm.ErrMigrationSet
	// ErrUnknownVersion: a shard is at a version the migration set does not have.
	ErrUnknownVersion = sm.ErrUnknownVersion
)

type (
	// MigrationSet is a loaded migrations directory (LoadMigrationSet).
	MigrationSet = sm.MigrationSet
	// RenderedMigration is one migration rendered for one shard.
	RenderedMigration = sm.RenderedMigration
	// Options of a migration run.
	Options = sm.Options
	// Result of a migration run, one ShardMigration per shard.
	Result = sm.Result
	// ShardMigration is what a run did on one shard.
	ShardMigration = sm.ShardMigration
	// MigrationError is a failed migration: shard, host, version, error.
	MigrationError = sm.MigrationError
	// HostProgress counts a run's shards on one host.
	HostProgress = sm.HostProgress
	// LockWait reports a run waiting for a shard's migration lock.
	LockWait = sm.LockWait
	// MigrationStatus is every shard's migration state (ReadMigrationStatus).
	MigrationStatus = sm.MigrationStatus
	// ShardVersion is one shard's version and recorded failure.
	ShardVersion = sm.ShardVersion
	// MigrationFailure is the failure a shard recorded in its FailureTable.
	MigrationFailure = sm.MigrationFailure
	// MigrationSummary counts shards per version (MigrationStatus.Summary).
	MigrationSummary = sm.MigrationSummary
	// GeneratorOptions of UpgradeGenerators.
	GeneratorOptions = sm.GeneratorOptions
	// GeneratorResult of UpgradeGenerators, one GeneratorUpgrade per shard.
	GeneratorResult = sm.GeneratorResult
	// GeneratorUpgrade is what UpgradeGenerators did on one shard.
	GeneratorUpgrade = sm.GeneratorUpgrade
)

// TemplateFuncs lists the sprig functions a migration template may call.
func TemplateFuncs() []string { return sm.TemplateFuncs() }

// LoadMigrationSet reads and checks the tern migrations in fsys.
func LoadMigrationSet(fsys fs.FS) (*MigrationSet, error) { return sm.LoadMigrationSet(fsys) }

// LoadMigrationDir reads and checks the tern migrations in dir.
func LoadMigrationDir(dir string) (*MigrationSet, error) { return sm.LoadMigrationDir(dir) }

// WriteRendered writes one shard's rendered migrations to dir in format
// (FormatTern or FormatGolangMigrate) and returns the files written.
func WriteRendered(dir, format string, migs []RenderedMigration) ([]string, error) {
	return sm.WriteRendered(dir, format, migs)
}

// Migrate runs set on the logical shards of the cluster (opts.Shards, or
// all) on their hosts: hosts in parallel, each shard under its own lock; a
// migration that fails rolls back on its shard and the others go on.
func Migrate(ctx context.Context, c *cluster.Cluster, set *MigrationSet, opts Options) (*Result, error) {
	return sm.Migrate(ctx, c, set, opts)
}

// Shards brings logical shards (nil: every shard) up to the version the
// rest of the cluster is at, or to a non-zero opts.To.
func Shards(ctx context.Context, c *cluster.Cluster, set *MigrationSet, shards []int, opts Options) (*Result, error) {
	return sm.Shards(ctx, c, set, shards, opts)
}

// ShardOn migrates one shard on conn, a database that may not be its
// host's yet (a move building the shard on its new host).
func ShardOn(ctx context.Context, conn *pgx.Conn, host string, set *MigrationSet, shard shardmgr.Shard, opts Options) (ShardMigration, error) {
	return sm.ShardOn(ctx, conn, host, set, shard, opts)
}

// ReadMigrationStatus reads every shard's version and recorded failure.
func ReadMigrationStatus(ctx context.Context, c *cluster.Cluster, set *MigrationSet) (*MigrationStatus, error) {
	return sm.ReadMigrationStatus(ctx, c, set)
}

// ReadMigrationStatusOf is ReadMigrationStatus for the shards in ids.
func ReadMigrationStatusOf(ctx context.Context, c *cluster.Cluster, set *MigrationSet, ids []int) (*MigrationStatus, error) {
	return sm.ReadMigrationStatusOf(ctx, c, set, ids)
}

// ReadShardVersion reads the version and recorded failure of the shard in
// schema through q (0 and nil when it was never migrated).
func ReadShardVersion(ctx context.Context, q shardmgr.Querier, schema string) (int, *MigrationFailure, error) {
	return sm.ReadShardVersion(ctx, q, schema)
}

// UpgradeGenerators brings every shard's generator to this release's
// version in place, keeping its counter; a foreign or newer generator is
// never replaced.
func UpgradeGenerators(ctx context.Context, c *cluster.Cluster, opts GeneratorOptions) (*GeneratorResult, error) {
	return sm.UpgradeGenerators(ctx, c, opts)
}

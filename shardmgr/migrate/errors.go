package migrate

import "errors"

// Sentinel errors of the package; test with errors.Is. They say what went
// wrong, never which command to run next (the CLI adds that).
var (
	// ErrShardSchemaMissing: the shard's schema is not on its host (run
	// shardid init).
	ErrShardSchemaMissing = errors.New("shard schema missing on its host")
	// ErrIrreversible: a migration to undo has no down SQL.
	ErrIrreversible = errors.New("migration has no down SQL (irreversible)")
	// ErrNoGenerator: a shard has no next_id() to upgrade (run shardid init).
	ErrNoGenerator = errors.New("no generator installed")
	// ErrForeignGenerator: a shard's next_id() is not one shardid can upgrade:
	// no shardid marker, or one for another shard, epoch or layout, which an
	// upgrade must not change (run shardid verify).
	ErrForeignGenerator = errors.New("generator cannot be upgraded")
	// ErrGeneratorTooNew: a shard's next_id() was installed by a newer
	// shardid than this one; it is left as it is.
	ErrGeneratorTooNew = errors.New("generator was installed by a newer shardid")
	// ErrMigrationSet is wrapped by every error about a migrations directory:
	// missing, empty, badly numbered, or a template that does not render.
	ErrMigrationSet = errors.New("invalid migrations")
	// ErrUnknownVersion: a shard is at a version the migration set does not
	// have (a set from another directory?).
	ErrUnknownVersion = errors.New("shard version beyond the migration set")
)

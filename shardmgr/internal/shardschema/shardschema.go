// Package shardschema holds the SQL about the objects inside a shard's
// schema (and the host's shardid schema) that several parts of shardmgr
// need: the migration bookkeeping tables, the columns whose DEFAULT is the
// shard's next_id(), the largest id stored, the schema's marker comment
// and the host's local_shards rows. Each statement is written here once.
//
// It must never import the shardmgr root package (the root imports
// packages that import it) nor write the catalog.
package shardschema

// Tables a migrated shard keeps in its own schema.
const (
	// VersionTable is tern's version table, <schema>.schema_version
	// (version int4 not null, one row), so the plain tern CLI agrees on
	// the version: tern migrate --version-table shard_0005.schema_version.
	VersionTable = "schema_version"
	// FailureTable holds at most one row: the last migration that failed
	// on the shard, or a disable-tx migration that is running or was
	// interrupted. A successful step removes it.
	FailureTable = "schema_version_failure"
)

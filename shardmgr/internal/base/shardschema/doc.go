// Package shardschema holds the SQL about the objects inside a shard's
// schema (and the host's shardid schema) that several parts of shardmgr
// need: the migration bookkeeping tables, the columns whose DEFAULT is the
// shard's next_id(), the largest id stored, the schema's marker comment
// and the host's local_shards rows. Each statement is written here once.
//
// It must never import the shardmgr root package (the root imports
// packages that import it) nor write the catalog.
package shardschema

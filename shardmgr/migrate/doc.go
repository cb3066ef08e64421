// Package migrate runs per-shard migrations: tern files, written once and
// rendered for every shard with text/template (and the pure sprig functions
// of TemplateFuncs), applied to each
// shard's schema on its host, hosts in parallel, with tern's own version
// table so the plain tern CLI agrees. It loads and renders migration sets
// (LoadMigrationSet, Render, WriteRendered for the tern and golang-migrate
// CLIs), runs them up or down (Migrate, Shards, ShardOn),
// reads each shard's state (ReadMigrationStatus, ReadMigrationStatusOf for
// some shards) and upgrades the shards'
// generators in place (UpgradeGenerators).
//
// A failed migration rolls back on its shard and is reported with the
// shard, the host and the error (*MigrationError inside a
// *shardmgr.ShardErrors); the other shards go on. It must never migrate a
// shard that is moving, and never reset a generator's counter.
//
// The runs take the operator's handle (shardmgr/cluster): one pool per
// host, connections within its per-server budget.
//
// This package is the migration engine itself, of the engine layer
// (shardmgr/internal/engine's doc.go says what that layer may import),
// below the operator packages that run migrations as part of their work:
// install (the generator upgrade, bringing new shards to the cluster's
// version, InitOptions.Migrations) and rebalance (building a moved shard
// at its old version, MoveOptions.Migrations) import it; it imports no
// operator package (shardmgr/layers_test.go holds that).
package migrate

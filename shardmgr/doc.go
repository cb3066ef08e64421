// Package shardmgr manages logical shards on many PostgreSQL hosts: the
// cluster file, the catalog that maps every logical shard to its host,
// installing the shards' id generators, routing application queries, and
// verifying that the whole installation can only produce unique ids.
//
// Following Instagram, a logical shard is a PostgreSQL schema (shard_0000 ..
// shard_8191) carrying its own generator, shard_NNNN.next_id(), usable as a
// column DEFAULT. A cluster file names the hosts:
//
//	cluster: demo
//	shards: 64
//	catalog: postgres://postgres@127.0.0.1:5433/shardid_catalog
//	hosts:
//	  - name: pg1
//	    dsn: postgres://postgres@127.0.0.1:5433/app
//	  - name: pg2
//	    dsn: postgres://${PG2_USER}:${PG2_PASSWORD}@10.0.0.2:5432/app
//
// Init creates what is missing: the databases, the catalog (golang-migrate
// set migrations.Catalog in the catalog's shardid schema), the map of
// shards to hosts in balanced contiguous ranges, each host's own record of
// the shards it holds (shardid.local_shards) and every shard's generator.
// Running it again changes nothing that is already right.
//
// The catalog is the single source of truth. Every change to it runs in
// one transaction under a catalog lock and bumps its generation; a change
// guarded by the generation its caller read fails with a *GenerationError
// when another manager changed the map first, so two managers cannot both
// win.
//
// Verify checks the cluster against itself by scanning every host, not only
// the catalog: each shard on exactly one host, generators present and
// returning ids with their own shard and the cluster's epoch, sequence
// settings that could repeat an id, clocks, a live probe for duplicates
// and, when asked, every stored id.
//
// A Router serves applications: it maps keys and ids to shards, keeps one
// pgx pool per host, runs functions in transactions scoped to a shard, and
// refuses writes to shards that are read-only or moving.
//
// PlanRebalance, Apply and MoveShard move whole logical shards between
// hosts when the cluster file adds a host or marks one drain: the schema
// is built on the target, copied with logical replication (or COPY,
// offline), fenced for a short cut-over, its counter carried over so no
// id repeats, checked table by table and flipped in the catalog. A journal
// in the catalog makes every move resumable and AbortMove rolls one back
// (docs/rebalance.md).
package shardmgr

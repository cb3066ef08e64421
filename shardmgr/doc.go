// Package shardmgr is what applications import to use a sharded shardid
// cluster: the cluster file (Config, LoadConfig), the catalog's map of
// logical shards to hosts (ShardMap, Shard, ReadMap), the Router that sends
// each query to its shard's host, and the typed errors of all of shardmgr.
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
// The catalog is the single source of truth. Every change to it runs in
// one transaction under a catalog lock and bumps its generation; a change
// guarded by the generation its caller read fails with a *GenerationError
// when another manager changed the map first, so two managers cannot both
// win.
//
// A Router serves applications: it maps keys and ids to shards (integer
// keys mod shards; string and byte keys by a hash fixed for good, KeyHash),
// keeps one pgx pool per host, runs functions in transactions scoped to a
// shard (Tx, ReadTx, by id with TxForID, over every shard with EachShard),
// refuses writes to shards that are read-only or moving, and keeps serving
// from its last map while the catalog is unreachable. It connects to each
// host with the host's app_dsn from the cluster file when it has one (a
// connection pooler: see Open), else with the catalog's DSN for the host. Shard.SQL writes a
// shard's table names into a query, quoted.
//
// The operator's work lives in subpackages, which an application does not
// need to import:
//
//   - shardmgr/install: init (databases, catalog, host records, generators)
//     and the cluster status;
//   - shardmgr/verify: the checks that prove the cluster can only produce
//     unique ids;
//   - shardmgr/migrate: per-shard tern migrations and generator upgrades;
//   - shardmgr/rebalance: planning and moving shards between hosts.
//
// Options follow one convention in every package of shardid (this one,
// shardmgr/cluster, rebalance, install, verify, hosts, migrate, migrations,
// idgen/segment and its httpapi, idgen/snowflake). A constructor's
// options (Open's RouterOption, cluster.Open's Option) are checked when it
// builds: one given a value it cannot use makes the constructor return an
// error naming it, such as "shardmgr: WithLogger(nil): ...". WithLogger(nil)
// is such an error everywhere. Without WithLogger, a package logs to
// slog.Default(); pass slog.New(slog.DiscardHandler) to silence it. An
// option's doc says its default as "Without it, DefaultX (value)."; a
// field of an options struct says "Zero means DefaultX (value)." (or what
// zero does). A Logger field left zero means the handle's logger.
//
// This package must never import those subpackages, nor tern,
// golang-migrate or sprig: an application that routes queries links pgx,
// the id layout and the cluster file's YAML, nothing of the operator's
// tooling. It never writes the catalog (shardmgr/internal/engine/catalog does).
package shardmgr

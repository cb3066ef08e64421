// Package internal holds what no user of shardid imports, in two layers
// that point one way:
//
//   - the foundations, directly under internal/: pgsession (the settings
//     every connection pins), pgdatabase (create a missing database),
//     pgtrust (refuse a schema the toolkit writes into that another role
//     made),
//     localpg and localpg/pgtest (throwaway PostgreSQL servers for tests,
//     the demo and benchmarks), envvar (the one ${VAR} expander),
//     jsonshape (the shape of a JSON document, as the golden files hold
//     it). The shard manager and the id
//     services are built on them, so a foundation never imports shardmgr
//     (or its subpackages), idgen/segment, idgen/snowflake or internal/app;
//   - the CLI's tools, under internal/app: what is built on shardmgr and
//     the id services (demo, localcluster, the benches, the charts, buildinfo: which binary this is, with the schema versions it writes) and the
//     test tooling that drives a catalog (schematest).
//
// TestFoundationsImportNothingBuiltOnThem holds the rule against the
// code's imports. This package itself has no code.
package internal

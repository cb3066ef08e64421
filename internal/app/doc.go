// Package app holds the CLI's tools: the packages that are built on the
// shard manager or the id services and that only cmd/shardid and tests
// import. Each lives in a subpackage:
//
//   - demo: what `shardid demo` runs;
//   - localcluster: what `shardid local` runs;
//   - genbench: `shardid bench`, the generators side by side;
//   - schemebench: `shardid bench schemes`, the id schemes side by side;
//   - charts: the figures as SVG (`shardid bench --svg`, docs/), linked
//     into cmd/shardid only with -tags charts;
//   - serveconfig: the cluster file's segments: and snowflake: sections,
//     which only `shardid serve` reads (kept out of package shardmgr so
//     that the router links no id service and no net/http);
//   - console: the operator console `shardid console` serves, its pages
//     and assets embedded;
//   - iddecode: ids taken apart as `shardid id decode` prints them, for
//     the CLI and the console alike;
//   - schematest: test tooling that brings a catalog to the schema states
//     of the upgrade policy;
//   - snowflakeserve: the snowflake half of `shardid serve` (the lease
//     taken in the background, GET /v1/snowflake);
//   - buildinfo: which binary this is (`shardid version`), with the catalog
//     schema and generator versions it writes.
//
// The foundations in internal/ (pgsession, pgdatabase, localpg, envvar)
// sit below: they never import these packages (package internal's test
// holds that). This package itself has no code.
package app

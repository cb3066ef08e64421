// Package demo is what `shardid demo` runs: the shard manager's main job on
// an embedded default. It starts three local PostgreSQL servers playing
// three hosts, writes a cluster file for them, spreads 64 logical shards
// over them with shardmgr.Init, inserts rows through the router from several
// goroutines, checks every id, prints a readable report, runs verify, and
// removes everything it made.
//
// It is one of the CLI's tools (internal/app): built on shardmgr, imported
// only by cmd/shardid and its own tests.
package demo

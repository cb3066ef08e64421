// Package localcluster is what `shardid local` runs: a cluster of local
// PostgreSQL servers that stays up between commands, for trying shardid
// out and for following the README.
//
// Up starts the servers (detached: they outlive the command), initialises
// the cluster with install.Init and writes a cluster file pointing at
// them; running it again finds the servers, starts those that are
// stopped and changes nothing else. AddHost adds one more server to the
// file, RemoveHost takes one that holds no shards out of the catalog and
// the file and stops it, Status lists them, Down stops them and, with purge, removes their
// data and the file.
//
// Everything lives under one directory (default .shardid): a directory per
// server (pg1, pg2, ...) holding its data and log, and local.json, which
// names the servers and the cluster file Up wrote.
//
// It is one of the CLI's tools (internal/app): built on shardmgr and
// shardmgr/install, imported only by cmd/shardid and its tests.
package localcluster

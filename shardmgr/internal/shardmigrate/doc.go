// Package shardmigrate is the per-shard migration engine: it loads and
// renders tern migration sets for every shard, runs them on each shard's
// schema on its host (hosts in parallel, each shard under its own lock,
// tern's version table), reads a shard's version and recorded failure,
// and upgrades the shards' generators in place.
//
// It sits below the operator packages so that they share it without
// importing one another: install upgrades generators and brings new
// shards to the cluster's version, rebalance builds a moved shard at its
// old version, and shardmgr/migrate gives operators the same names
// (aliases and forwards). It imports none of them.
package shardmigrate

// Package genbench measures the per-shard generators side by side in one
// run: the safe generator against Instagram's published function and a bare
// nextval, and a bulk INSERT using the safe DEFAULT against the same INSERT
// into a bigserial table. Cases are interleaved round by round and each
// reports its median, because the machines it runs on are small and noisy.
// Optionally it also runs pgbench-style cases: several sessions making
// single-row INSERTs against the same table keyed by bigserial.
//
// It is one of the CLI's tools (internal/app), behind `shardid bench`; the
// stock benchmark of shardmgr/rebalance reuses its machine description.
package genbench

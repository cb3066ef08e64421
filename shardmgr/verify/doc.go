// Package verify proves, or disproves, that a shardid cluster can only
// produce unique ids. Verify scans every host, not only the catalog: each
// shard on exactly one host and a copy elsewhere fenced, generators present
// with the expected marker and returning ids of their own shard near the
// host's clock, counter sequences that cannot repeat, counters ahead of
// every stored id, no session blocking a generator, clocks in step, a live
// probe for duplicates, a catalog not older than the hosts' own records
// and, with Deep, every stored id. The checks are one
// table (checks in verify.go); each problem names its check, shard and
// host.
//
// It must never change anything: it reads the catalog and the hosts, under
// lock and statement timeouts, and draws a few ids for its probe.
//
// Verify takes the operator's handle (shardmgr/cluster) and runs its
// sessions in the handle's pools, under its own lock and statement
// timeouts (a cluster.Session).
package verify

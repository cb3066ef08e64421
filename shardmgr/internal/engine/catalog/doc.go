// Package catalog is the one writer of the shard catalog: outside the
// catalog's own migrations (migrations/catalog), every write of a catalog
// table (INSERT, UPDATE, DELETE or COPY into shardid.cluster, changes,
// shards, hosts, host_secrets, moves, console_audit or catalog_readers)
// is a named function of this package, and a test (writers_test.go)
// fails on such a write anywhere else in the repository's Go code.
//
// The functions by what they write:
//   - The map: every change of it runs in one transaction holding the
//     catalog's cluster row (a bounded wait) and bumps the generation
//     (Change, ChangeWithin, ChangeIf, ChangeAbove; CreateCluster inside
//     the transaction that creates the cluster). Inside a change:
//     SetShardState, a move's FenceShard, FlipShard (the point of no
//     return) and GiveBackShard, and the catalog repair's PlaceShard
//     (moves.go).
//   - The host rows (hosts.go, hosts_identity.go): InsertHost, PutHost,
//     RemoveHost, SetHostDSN, SetHostDrain, which init, the host commands
//     and the catalog repair call inside a change; the identities of the
//     servers behind them (RecordHostIdentity, FailOverHost); the hashes
//     of the hosts' secrets (cluster_identity.go: PutHostSecretHash).
//   - The move journal, shardid.moves (journal.go, retired.go): JournalMove
//     and each phase a move completes (JournalPhase, JournalCopied,
//     JournalSchema, JournalCleaned, JournalPhaseBack), its progress and
//     error, its refused window (JournalRefusedEnd; FenceShard and
//     FlipShard keep it with the map), its abort (JournalAborted), and the
//     catalog repair's closed, finished and lost moves (JournalClosed,
//     JournalFinished, JournalRetired).
//   - The console's audit log (audit.go).
//
// It also holds what several operator packages read from the catalog: a
// shard's generator parameters, the move journal's phase names and the
// point of no return (phases.go: Phase, PointOfNoReturn, OpenMoves), the
// open moves and the comparison of the catalog's hosts with the cluster
// file's (CompareHosts).
//
// It imports the shardmgr root (for its types), so the root must never
// import it.
package catalog

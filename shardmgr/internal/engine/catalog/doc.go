// Package catalog is the one place that writes the shard catalog: every
// change of the map (Change, ChangeIf, SetShardState) runs in one
// transaction holding the catalog's cluster row (a bounded wait) and bumps
// the generation, and the host rows are written here only (hosts.go:
// InsertHost, PutHost, RemoveHost, which init calls, and the catalog
// repair InsertHost). It also holds
// what several operator packages read from the catalog: a shard's
// generator parameters, the move journal's phase names and the point of
// no return (phases.go: Phase, PointOfNoReturn, OpenMoves), the open moves
// and the comparison of the catalog's hosts with the cluster file's
// (CompareHosts).
//
// It imports the shardmgr root (for its types), so the root must never
// import it.
package catalog

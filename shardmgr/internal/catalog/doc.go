// Package catalog is the one place that writes the shard catalog: every
// change of the map (Change, ChangeIf, SetShardState) runs in one
// transaction holding the catalog's cluster row (a bounded wait) and bumps the generation. It also
// holds what several operator packages read from the catalog: the cluster
// map by cluster file (ReadClusterMap), a shard's generator parameters,
// the open-moves predicate and the comparison of the catalog's hosts with
// the cluster file's (CompareHosts).
//
// It imports the shardmgr root (for its types), so the root must never
// import it.
package catalog

// Package repair rebuilds the catalog's map from the hosts' own records
// after the catalog database was restored from a backup older than the
// hosts (shardid catalog repair --from-hosts).
//
// Every step that makes a shard live on a host records there, after the
// catalog committed it, the generation of that placement
// (shardid.local_shards); a retired copy's row goes with its rename. So the
// hosts together know, for each shard, which host holds its live copy at
// the newest generation: the catalog's truth as of the newest change any
// host saw. PlanFromHosts shows the differences; FromHosts applies them in
// one catalog transaction (through shardmgr/internal/engine/catalog, the one
// writer) whose generation is above everything the hosts recorded, so
// that routers reload and every later comparison sees a catalog that is
// not older than the hosts. The retired copies (shard_NNNN_moved_gG) of
// moves the restored journal never saw are journaled in the same
// transaction, as finished moves whose keep period is over, so that
// rebalance cleanup drops them (RetiredCopy). A move the restored journal
// holds unfinished ends there too: finished, with the retired copy it left
// and its own keep period, when the hosts hold its shard on its target
// (FinishedMove); aborted when they hold it elsewhere.
//
// A catalog that holds no cluster while the hosts do (emptied by a failed
// restore) is rebuilt from the same records (Plan.CreateCatalog): the
// cluster with the identity the hosts record, the hashes of the secrets
// they hold, every shard where a host holds it.
//
// It must never guess: two hosts that hold one shard live at the same
// generation, or a shard that no host holds, stop it with a
// *ConflictError naming them, and a host of the cluster file that cannot
// be read stops it too; nothing is changed then.
package repair

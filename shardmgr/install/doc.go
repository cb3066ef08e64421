// Package install creates and completes a shardid cluster from its cluster
// file (Init): the databases named in the DSNs, the catalog (the
// golang-migrate set migrations.Catalog), the balanced map of shards to
// hosts, every host's own record (migrations.Host: shardid.host_info and
// shardid.local_shards) and every shard's schema and generator; and it
// reports the cluster's status (ClusterStatus: the map and the moves in
// progress) for shardid status. Every call takes the operator's handle
// (shardmgr/cluster), whose pools it uses: a database is connected to once
// for all of init's checks and work. Init is the one step that applies the
// cluster file's hosts to the catalog (added, new DSN, drain mark,
// removed), through the catalog package's host writers; the host commands
// (package hosts) change one host in the catalog and the file together.
//
// Init is idempotent: run again, it finishes what is missing and changes
// nothing that is right. On every shard whose generator it finds it runs
// this release's install SQL again (repairing privileges changed by hand)
// and upgrades an older generator version (migrate.UpgradeGenerators), so
// that after init every shard has this release's generator. Before it
// records anything it asks the servers whether two hosts are one database
// or a host belongs elsewhere, and it refuses a catalog older than the
// hosts' own records (restored from an older backup: ErrCatalogStale),
// whose map it would otherwise install again on hosts the shards left.
//
// It must never replace a generator whose marker differs from the
// catalog's but for an older version, never change what is fixed once initialised (cluster name,
// shard count, epoch), and never change the catalog's map except through
// shardmgr/internal/engine/catalog (one transaction, generation bumped).
package install

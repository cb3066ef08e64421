// Package hosts is the host lifecycle of a cluster, on the operator's
// handle (shardmgr/cluster): List probes every host (what it holds, the
// server it reaches, its timeline, primary or standby, replication lag);
// SetDSN points a host at a new address once the server there proves to
// be the same server (the system identifier and timeline the catalog
// recorded); Failover points it at its promoted standby, after carrying
// every shard's counter past the ids the old primary may have handed out;
// SetDrain marks a host draining (the moves that empty it are
// rebalance's: rebalance.PlanOptions.Only); Remove takes a host that
// holds nothing out of the cluster.
//
// Each change is made in the catalog (one catalog change, generation
// bumped, through the catalog package's host writers) and in the cluster
// file (edited in place, comments kept, written atomically) together, by
// one function (change: the file is written last and put back when the
// catalog change fails), so that the two agree afterwards: a move refuses
// a file the catalog does not agree with (rebalance.ErrHostsNotApplied),
// and init would undo a catalog change the file does not carry. Running
// routers follow at their next refresh: a new DSN gets a new pool, a
// removed host's pool closes.
//
// It must never point a host at a database that does not record itself
// as that host of this cluster, at a server in recovery, at a promoted
// standby whose counters were not advanced (SetDSN refuses a newer
// timeline than recorded: ErrNeedsFailover), at a server whose system
// identifier differs from the one the catalog recorded (or from the old
// address's; the one exception is Failover with NewServer, for the host's
// database restored onto another server, whose counters it advances
// first), or at a copy while the old primary still accepts writes;
// never remove a host that holds a shard, takes part in an unfinished
// move or keeps a moved shard's retired copy; and never touch the servers
// or databases themselves (a removed host's database stays).
package hosts

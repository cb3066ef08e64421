// Package cluster is the operator's handle on one cluster: opened once
// per command, it validates the cluster file, owns every connection the
// operator packages (install, verify, migrate) make to the catalog and
// the hosts, checks the catalog's and each host's schema version once,
// and is closed once. It plays the part of goose's Provider:
//
//	c, err := cluster.Open(ctx, cfg, cluster.WithLogger(log))
//	if err != nil { ... }
//	defer c.Close()
//	rep, err := verify.Verify(ctx, c, verify.Options{})
//
// The handle owns the connection budget: at most WithConnsPerServer
// connections to one PostgreSQL server (host:port) across all its
// databases and pools, so that work on a hundred hosts of four servers
// starts a bounded number of backends; a connect that fails at the
// network is retried with backoff (WithConnectRetry). The budget covers
// single connections too (CatalogConn, HostConn, and configs from
// CatalogConnConfig and HostConnConfig for golang-migrate's sql.DB or a
// replication connection): a command's every connection draws on it, a
// place coming back once the server has ended the session. Work that
// needs two connections at once takes both places together (Reserve).
// Every session is named DefaultApplication unless WithApplicationName,
// the session kind or the DSN says otherwise.
//
// What the budget cannot cover: a logical-replication subscription's
// connection to the source is opened by the target server's apply
// worker, not by this process (one per subscription during a move).
//
// Pools connect
// lazily: opening a handle on a cluster whose databases do not exist yet
// (init creates them) is fine.
//
// The shard map itself is the catalog's: Map reads it (the same
// shardmgr.ShardMap the Router serves from). Hosts come from the cluster
// file, which must agree with the catalog for everything but init (see
// install.Init and rebalance.ErrHostsNotApplied).
//
// It must never open a second pool for the same host and session kind,
// nor hold more connections to a server than its budget, pools and
// single connections together.
package cluster

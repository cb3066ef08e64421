package shardmgr

import (
	"context"
	"maps"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CatalogChecks is the number of catalog checks r made, for the external
// tests.
func CatalogChecks(r *Router) int64 { return r.checks.Load() }

// RouterWithShards is a router with a map of n shards and no catalog or
// hosts, for the tests of the key mappings.
func RouterWithShards(n int) *Router {
	return &Router{m: &ShardMap{Shards: make([]Shard, n)}}
}

// The version tables the root reads, and how often a router asks the
// catalog while writes go to a moving shard, for the external tests.
const (
	MovingRefresh       = movingRefresh
	CatalogVersionTable = catalogVersionTable
	HostVersionTable    = hostVersionTable
)

// RouterPool is the pool r routes host's shards to, nil when it has none,
// for the external tests.
func RouterPool(r *Router, host string) *pgxpool.Pool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pools[host]
}

// RouterCheckHosts runs r's check of its map against the hosts' records,
// for the external tests (its cost is measured).
func RouterCheckHosts(ctx context.Context, r *Router) *CatalogStaleError {
	r.mu.RLock()
	m, pools := r.m, maps.Clone(r.pools)
	r.mu.RUnlock()
	_, e := r.checkHosts(ctx, m, pools)
	return e
}

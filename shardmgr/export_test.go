package shardmgr

// CatalogChecks is the number of catalog checks r made, for the external
// tests.
func CatalogChecks(r *Router) int64 { return r.checks.Load() }

// RouterWithShards is a router with a map of n shards and no catalog or
// hosts, for the tests of the key mappings.
func RouterWithShards(n int) *Router {
	return &Router{m: &ShardMap{Shards: make([]Shard, n)}}
}

// The version tables the root reads, for the external tests.
const (
	CatalogVersionTable = catalogVersionTable
	HostVersionTable    = hostVersionTable
)

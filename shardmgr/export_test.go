package shardmgr

// CatalogChecks is the number of catalog checks r made, for the external
// tests.
func CatalogChecks(r *Router) int64 { return r.checks.Load() }

// The version tables the root reads, for the external tests.
const (
	CatalogVersionTable = catalogVersionTable
	HostVersionTable    = hostVersionTable
)

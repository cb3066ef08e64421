package httpapi

import (
	"os"
	"runtime/debug"
)

// DefaultHeapLimit is the heap size at which `shardid serve` collects
// garbage, in bytes.
const DefaultHeapLimit = 256 << 20

// LimitGC makes the garbage collector run when the heap reaches limit
// bytes (GOGC=off, GOMEMLIMIT=limit) instead of each time it doubles.
//
// The service's live heap is a few megabytes while net/http allocates a
// few hundred bytes per request, so Go's default rule collects several
// times a second at a few thousand requests per second, and the requests
// that meet a collection make the latency tail (docs/segments.md). With
// the limit it collects about once per limit's worth of allocation. A
// GOGC or GOMEMLIMIT set in the environment wins: then, or when limit is
// not positive, LimitGC changes nothing and returns false.
func LimitGC(limit int64) bool {
	if limit <= 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
	return true
}

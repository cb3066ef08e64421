// Package httpapi serves a segment.Allocator over HTTP: ids as JSON,
// health per source database, and Prometheus metrics.
//
//	h, err := httpapi.New(alloc)
//	...
//	err = httpapi.Serve(ctx, listener, h, 10*time.Second)
//
// The id path is written for throughput: no router, no per-request maps,
// buffers from a pool and the JSON of the id list written by hand.
package httpapi

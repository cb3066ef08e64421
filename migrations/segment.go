package migrations

import (
	"embed"
	"io/fs"
)

//go:embed segment/*.sql
var segmentFiles embed.FS

// Segment creates the shardid.segments table of a segment source database
// (idgen/segment): one row per business tag.
var Segment = Set{Name: "segment", FS: segmentFS(), Table: "segment_migrations"}

func segmentFS() fs.FS {
	sub, err := fs.Sub(segmentFiles, "segment")
	if err != nil {
		panic(err) // the directory is embedded above; cannot happen
	}
	return sub
}

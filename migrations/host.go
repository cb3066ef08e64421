package migrations

import (
	"embed"
	"io/fs"
)

//go:embed host/*.sql
var hostFiles embed.FS

// Host creates and upgrades a host database's own record
// (shardid.host_info, shardid.local_shards).
var Host = Set{Name: "host", FS: hostFS(), Table: "host_migrations"}

func hostFS() fs.FS {
	sub, err := fs.Sub(hostFiles, "host")
	if err != nil {
		panic(err) // the directory is embedded above; cannot happen
	}
	return sub
}

package migrations

import (
	"embed"
	"io/fs"
)

//go:embed catalog/*.sql
var catalogFiles embed.FS

// Catalog creates and upgrades the shard catalog (cluster, hosts, shards,
// changes) in the shardid schema of the catalog database.
var Catalog = Set{Name: "catalog", FS: catalogFS(), Table: "catalog_migrations"}

func catalogFS() fs.FS {
	sub, err := fs.Sub(catalogFiles, "catalog")
	if err != nil {
		panic(err)
	}
	return sub
}

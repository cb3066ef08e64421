package migrations

import (
	"embed"
	"io/fs"
)

//go:embed snowflake/*.sql
var snowflakeFiles embed.FS

// Snowflake creates the shardid.snowflake_leases table of a lease database
// (idgen/snowflake): one row per leased worker id, and
// shardid.snowflake_lease_marks, what survives the deletion of a row.
var Snowflake = Set{Name: "snowflake", FS: snowflakeFS(), Table: "snowflake_migrations"}

func snowflakeFS() fs.FS {
	sub, err := fs.Sub(snowflakeFiles, "snowflake")
	if err != nil {
		panic(err) // the directory is embedded above; cannot happen
	}
	return sub
}

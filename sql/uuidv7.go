package sql

import (
	"bytes"
	"fmt"
)

// DefaultUUIDv7Schema is where RenderUUIDv7 installs when given no schema.
const DefaultUUIDv7Schema = "public"

// UUIDv7Version is the version of the uuidv7 objects, in their comments:
// 2 takes PostgreSQL 18's built-in uuidv7() there.
const UUIDv7Version = 2

// RenderUUIDv7 returns idempotent SQL that installs schema.uuidv7(), RFC
// 9562 version 7 UUIDs that strictly increase within a session, usable as a
// column DEFAULT, and schema.uuidv7_time(uuid), the millisecond an id holds.
// On PostgreSQL 18 and later (server_version_num, read when the SQL runs)
// uuidv7() calls the built-in pg_catalog.uuidv7(); before, it is PL/pgSQL.
// An empty schema means DefaultUUIDv7Schema. The functions are SECURITY
// INVOKER and touch nothing shared (the last id lives in a session
// setting), so they need no REVOKE.
func RenderUUIDv7(schema string) (string, error) {
	if schema == "" {
		schema = DefaultUUIDv7Schema
	}
	if err := CheckSchema(schema); err != nil {
		return "", err
	}
	var b bytes.Buffer
	d := struct {
		Schema  string
		Version int
	}{schema, UUIDv7Version}
	if err := templates.ExecuteTemplate(&b, "uuidv7.sql.tmpl", d); err != nil {
		return "", fmt.Errorf("render uuidv7 for schema %s: %w", schema, err)
	}
	return b.String(), nil
}

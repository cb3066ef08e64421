package shardschema

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/migrations"
)

// The handle and verify check trust in ToolkitSchema; the migrations
// create their tables in migrations.Schema: one schema.
func TestToolkitSchemaIsTheMigrationsSchema(t *testing.T) {
	require.Equal(t, migrations.Schema, ToolkitSchema)
}

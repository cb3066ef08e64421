package shardmgr_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr"
)

// The root keeps the schema versions as constants so that the router links
// no golang-migrate; they must be the migration sets' own.
func TestSchemaConstantsMatchMigrations(t *testing.T) {
	v, err := migrations.Catalog.Latest()
	require.NoError(t, err)
	require.EqualValues(t, v, shardmgr.CatalogSchema, "a new catalog migration must raise shardmgr.CatalogSchema")
	v, err = migrations.Host.Latest()
	require.NoError(t, err)
	require.EqualValues(t, v, shardmgr.HostSchema, "a new host migration must raise shardmgr.HostSchema")
	require.Equal(t, migrations.Catalog.Table, shardmgr.CatalogVersionTable)
	require.Equal(t, migrations.Host.Table, shardmgr.HostVersionTable)
}

package install

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/schematest"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// Init refuses, before it writes anything, a host whose own schema a newer
// shardid migrated or whose migration failed half way: one line naming the
// host and both versions.
func TestInitRefusesHostSchemaItDoesNotKnow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, sql string
		want      error
		text      string
	}{
		{"newer", "UPDATE shardid.host_migrations SET version = version + 1", shardmgr.ErrCatalogTooNew,
			fmt.Sprintf("host pg2's shardid schema was upgraded to schema %d by a newer shardid; this binary knows %d", shardmgr.HostSchema+1, shardmgr.HostSchema)},
		{"dirty", "UPDATE shardid.host_migrations SET dirty = true", shardmgr.ErrCatalogDirty,
			fmt.Sprintf("host pg2's shardid schema is dirty at schema %[1]d: migration %[1]d failed half way; this binary knows %[1]d", shardmgr.HostSchema)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := initCluster(t, 4)
			_, err := clustertest.HostPool(t, cfg, "pg2").Exec(clustertest.Ctx(t), tc.sql)
			require.NoError(t, err)
			gen := schematest.Generation(t, cfg.Catalog)
			// Changes Init would make: a fourth host in the file, in a
			// database it would create.
			server := pgtest.Servers(t, 3)[1]
			db := fmt.Sprintf("sm%d_pg4", clustertest.DBCounter.Add(1))
			clustertest.DropLater(t, server, db)
			cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: server.DSN(db)})
			_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
			require.ErrorIs(t, err, tc.want)
			require.EqualError(t, err, tc.text)
			require.Equal(t, gen, schematest.Generation(t, cfg.Catalog), "the catalog changed")
			var created bool
			require.NoError(t, clustertest.Pool(t, server.DSN("postgres")).QueryRow(clustertest.Ctx(t),
				`SELECT EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = $1)`, db).Scan(&created))
			require.False(t, created, "init created a database")
		})
	}
}

package migrate_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// The tests of this package are external (package migrate_test): they
// need clusters installed by package install, which imports migrate.

func TestMain(m *testing.M) { pgtest.Main(m) }

var sampleMigrations = clustertest.SampleMigrations

func ctx(t testing.TB) context.Context            { return clustertest.Ctx(t) }
func pool(t testing.TB, dsn string) *pgxpool.Pool { return clustertest.Pool(t, dsn) }
func hostPool(t testing.TB, cfg *shardmgr.Config, name string) *pgxpool.Pool {
	return clustertest.HostPool(t, cfg, name)
}

func initCluster(t testing.TB, shards int) *shardmgr.Config { return installtest.Cluster(t, shards) }

// migrationErrors are the *migrate.MigrationError failures of a run's
// *shardmgr.ShardErrors, in order.
func migrationErrors(t testing.TB, serr *shardmgr.ShardErrors) []*migrate.MigrationError {
	t.Helper()
	out := make([]*migrate.MigrationError, len(serr.Errs))
	for i, err := range serr.Errs {
		require.ErrorAs(t, err, &out[i])
	}
	return out
}

package rebalance

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The shared cluster helpers (package clustertest), under the names the
// tests of this package have always used.

var (
	sampleMigrations = clustertest.SampleMigrations
	dbCounter        = &clustertest.DBCounter
)

func ctx(t testing.TB) context.Context                     { return clustertest.Ctx(t) }
func pool(t testing.TB, dsn string) *pgxpool.Pool          { return clustertest.Pool(t, dsn) }
func dropLater(t testing.TB, s *localpg.Server, db string) { clustertest.DropLater(t, s, db) }
func hostPool(t testing.TB, cfg *shardmgr.Config, name string) *pgxpool.Pool {
	return clustertest.HostPool(t, cfg, name)
}
func clusterMap(t testing.TB, cfg *shardmgr.Config) *shardmgr.ShardMap {
	return clustertest.ClusterMap(t, cfg)
}

func initCluster(t testing.TB, shards int) *shardmgr.Config { return installtest.Cluster(t, shards) }

// applyHosts applies cfg's hosts to the catalog (init, the one step that
// does): a move or apply refuses a file the catalog does not agree with.
func applyHosts(t testing.TB, cfg *shardmgr.Config) {
	t.Helper()
	_, err := install.Init(ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
}

func sampleSet(t testing.TB) *migrate.MigrationSet {
	t.Helper()
	set, err := migrate.LoadMigrationDir(sampleMigrations)
	require.NoError(t, err)
	return set
}

func setOf(t testing.TB, files map[string]string) *migrate.MigrationSet {
	t.Helper()
	set, err := migrate.LoadMigrationSet(clustertest.MapFS(files))
	require.NoError(t, err)
	return set
}

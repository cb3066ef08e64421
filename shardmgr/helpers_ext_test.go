package shardmgr_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The shared cluster helpers (package clustertest) for the tests that need
// a cluster installed by the operator packages, which the root's in-package
// tests cannot import.

func ctx(t testing.TB) context.Context            { return clustertest.Ctx(t) }
func pool(t testing.TB, dsn string) *pgxpool.Pool { return clustertest.Pool(t, dsn) }
func hostPool(t testing.TB, cfg *shardmgr.Config, name string) *pgxpool.Pool {
	return clustertest.HostPool(t, cfg, name)
}
func clusterMap(t testing.TB, cfg *shardmgr.Config) *shardmgr.ShardMap {
	return clustertest.ClusterMap(t, cfg)
}
func testCluster(t testing.TB, shards int, create bool) *shardmgr.Config {
	return clustertest.Cluster(t, shards, create)
}
func openRouter(t testing.TB, cfg *shardmgr.Config, opts ...shardmgr.RouterOption) *shardmgr.Router {
	return clustertest.OpenRouter(t, cfg, opts...)
}
func routeLikes(t testing.TB, r *shardmgr.Router, shard, n int) {
	clustertest.RouteLikes(t, r, shard, n)
}
func likeIDs(t testing.TB, cfg *shardmgr.Config, shard int) []int64 {
	return clustertest.LikeIDs(t, cfg, shard)
}

func initCluster(t testing.TB, shards int) *shardmgr.Config { return installtest.Cluster(t, shards) }

func sampleSet(t testing.TB) *migrate.MigrationSet {
	t.Helper()
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	return set
}

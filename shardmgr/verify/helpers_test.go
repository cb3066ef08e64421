package verify

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/installtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The shared cluster helpers (package clustertest), under the names the
// tests of this package have always used.

var dbCounter = &clustertest.DBCounter

func ctx(t testing.TB) context.Context            { return clustertest.Ctx(t) }
func pool(t testing.TB, dsn string) *pgxpool.Pool { return clustertest.Pool(t, dsn) }
func hostPool(t testing.TB, cfg *shardmgr.Config, name string) *pgxpool.Pool {
	return clustertest.HostPool(t, cfg, name)
}
func testCluster(t testing.TB, shards int, create bool) *shardmgr.Config {
	return clustertest.Cluster(t, shards, create)
}
func futureID(shard int, ahead time.Duration, seq int64) int64 {
	return clustertest.FutureID(shard, ahead, seq)
}

func initCluster(t testing.TB, shards int) *shardmgr.Config { return installtest.Cluster(t, shards) }

package install

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The shared cluster helpers (package clustertest), under the names the
// tests of this package have always used.

var dbCounter = &clustertest.DBCounter

func ctx(t testing.TB) context.Context                     { return clustertest.Ctx(t) }
func pool(t testing.TB, dsn string) *pgxpool.Pool          { return clustertest.Pool(t, dsn) }
func dropLater(t testing.TB, s *localpg.Server, db string) { clustertest.DropLater(t, s, db) }
func hostPool(t testing.TB, cfg *shardmgr.Config, name string) *pgxpool.Pool {
	return clustertest.HostPool(t, cfg, name)
}
func testCluster(t testing.TB, shards int, create bool) *shardmgr.Config {
	return clustertest.Cluster(t, shards, create)
}
func tableExists(t testing.TB, p *pgxpool.Pool, name string) bool {
	return clustertest.TableExists(t, p, name)
}

func initCluster(t testing.TB, shards int) *shardmgr.Config {
	t.Helper()
	cfg := clustertest.Cluster(t, shards, false)
	_, err := Init(ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	return cfg
}

func requireVerifyOK(t testing.TB, cfg *shardmgr.Config) {
	t.Helper()
	rep, err := verify.Verify(ctx(t), clustertest.Handle(t, cfg), verify.Options{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify: %v", rep.Problems)
}

package install

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func initCluster(t testing.TB, shards int) *shardmgr.Config {
	t.Helper()
	cfg := clustertest.Cluster(t, shards, false)
	_, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	return cfg
}

func requireVerifyOK(t testing.TB, cfg *shardmgr.Config) {
	t.Helper()
	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify: %v", rep.Problems)
}

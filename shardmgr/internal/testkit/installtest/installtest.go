// Package installtest gives the operator packages' tests a cluster that
// init has installed: the one helper behind their initCluster (package
// install's own tests, which it imports, keep theirs).
package installtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// Cluster is clustertest.Cluster for shards logical shards, installed by
// install.Init.
func Cluster(t testing.TB, shards int) *shardmgr.Config {
	t.Helper()
	cfg := clustertest.Cluster(t, shards, false)
	_, err := install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	return cfg
}

package install_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/logbuf"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// The logger is the handle's, set once when it is opened: Init without
// one of its own logs there.
func TestInitLogsToTheHandlesLogger(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, false)
	var out logbuf.Buffer
	c, err := cluster.Open(ctx, cfg, cluster.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	require.NoError(t, err)
	defer c.Close()
	_, err = install.Init(ctx, c, install.InitOptions{})
	require.NoError(t, err)
	require.Contains(t, out.String(), "created database")
}

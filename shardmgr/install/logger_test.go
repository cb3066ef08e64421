package install_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The logger is the handle's, set once when it is opened: Init without
// one of its own logs there.
func TestInitLogsToTheHandlesLogger(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 4, false)
	var out lockedBuffer
	c, err := cluster.Open(ctx, cfg, cluster.WithLogger(slog.New(slog.NewTextHandler(&out, nil))))
	require.NoError(t, err)
	defer c.Close()
	_, err = install.Init(ctx, c, install.InitOptions{})
	require.NoError(t, err)
	require.Contains(t, out.String(), "created database")
}

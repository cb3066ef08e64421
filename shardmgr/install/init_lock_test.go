package install

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A role that may only connect to the catalog's database holds the init
// lock: init waits for it at most InitOptions.LockWait, then gives up
// naming the session (pid, role, application); once it is gone, init
// runs.
func TestInitLockWaitIsBounded(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 2)
	conn, role := clustertest.Outsider(t, cfg.Catalog, "squatter")
	_, err := conn.Exec(clustertest.Ctx(t), `SELECT pg_advisory_lock($1, 1)`, catalog.LockClass)
	require.NoError(t, err)
	var pid int32
	require.NoError(t, conn.QueryRow(clustertest.Ctx(t), `SELECT pg_backend_pid()`).Scan(&pid))

	const wait = 2 * time.Second
	start := time.Now()
	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{LockWait: wait})
	took := time.Since(start)
	require.ErrorIs(t, err, shardmgr.ErrLockWait)
	var lw *pg.LockWaitError
	require.ErrorAs(t, err, &lw)
	require.GreaterOrEqual(t, lw.Waited, wait)
	require.ErrorContains(t, err, "init lock")
	require.ErrorContains(t, err, fmt.Sprintf("pid %d (role %s, application %q", pid, role, "squatter"))
	require.Less(t, took, time.Minute, "bounded by LockWait, not by the holder")

	require.NoError(t, conn.Close(context.Background()))
	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{LockWait: wait})
	require.NoError(t, err)
}

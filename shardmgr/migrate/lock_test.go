package migrate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// A role that may only connect to a host's database holds a shard's
// migration lock (first key 'shmg', second the shard): the run waits for
// it at most LockWait, then fails that shard naming the session (pid,
// role, application); the other shards migrate, and the shard does once
// the lock is gone.
func TestMigrateLockWaitIsBounded(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 2)
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	m := clustertest.ClusterMap(t, cfg)
	h, _ := cfg.Host(m.Shards[1].Host)
	conn, role := clustertest.Outsider(t, h.DSN, "squatter")
	_, err = conn.Exec(clustertest.Ctx(t), `SELECT pg_advisory_lock($1, 1)`, int32(0x73686d67))
	require.NoError(t, err)
	var pid int32
	require.NoError(t, conn.QueryRow(clustertest.Ctx(t), `SELECT pg_backend_pid()`).Scan(&pid))

	const wait = 2 * time.Second
	start := time.Now()
	var waited []migrate.LockWait
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{LockWait: wait, Waiting: func(w migrate.LockWait) { waited = append(waited, w) }})
	require.Less(t, time.Since(start), time.Minute, "bounded by LockWait, not by the holder")
	require.ErrorIs(t, err, shardmgr.ErrLockWait)
	require.ErrorContains(t, err, "shard 1")
	require.ErrorContains(t, err, fmt.Sprintf("pid %d (role %s, application %q", pid, role, "squatter"))
	require.Equal(t, []migrate.LockWait{{Shard: 1, Host: h.Name, HolderPID: int(pid)}}, waited)
	require.True(t, clustertest.TableExists(t, clustertest.HostPool(t, cfg, m.Shards[0].Host), "shard_0000.likes"))

	require.NoError(t, conn.Close(context.Background()))
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{LockWait: wait})
	require.NoError(t, err)
}

package hosts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// TestMultiHostDSNFollowsFailover: a host whose DSN names its primary and
// a streaming standby (made by pg_basebackup -R) goes through init, the
// handle and a router; after the standby is promoted and the primary
// stopped, the router writes ids on the promoted server by itself, with no
// command run. Along the way set-dsn refuses the standby while it is in
// recovery, while the old primary still accepts writes, and once it is the
// only primary too (a promoted standby needs Failover, which advances its
// counters); Failover then points the host at it alone, and no id repeats.
func TestMultiHostDSNFollowsFailover(t *testing.T) {
	ctx := clustertest.Ctx(t)
	primary := pgtest.Own(t, localpg.Options{})
	standby, err := primary.NewAsyncStandby(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { standby.Stop() })

	base := clustertest.Cluster(t, 4, false)
	db := fmt.Sprintf("sm%d_multi", clustertest.DBCounter.Add(1))
	base.Hosts[0].DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		primary.Port, standby.Port, db)
	cfg := initFile(t, base) // creates the database on the primary, through the DSN
	shard := clustertest.ClusterMap(t, cfg).ShardsOn("pg1")[0]
	r := clustertest.OpenRouter(t, cfg)

	seen := map[int64]bool{}
	// nextID takes an id from shard's generator through the router and
	// returns the port of the server that gave it.
	nextID := func(ctx context.Context) (int, error) {
		var id int64
		var port int
		err := r.Tx(ctx, shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			return tx.QueryRow(ctx, `SELECT `+s.NextID()+`, inet_server_port()`).Scan(&id, &port)
		})
		if err == nil {
			require.False(t, seen[id], "id %d repeated", id)
			seen[id] = true
		}
		return port, err
	}
	for range 20 {
		port, err := nextID(ctx)
		require.NoError(t, err)
		require.Equal(t, primary.Port, port)
	}
	// The standby replays all of it.
	pp := clustertest.Pool(t, primary.DSN(db))
	var lsn string
	require.NoError(t, pp.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn))
	sp := clustertest.Pool(t, standby.DSN(db))
	require.Eventually(t, func() bool {
		var done bool
		return sp.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&done) == nil && done
	}, 3*time.Minute, 100*time.Millisecond, "the standby replays the primary's WAL")

	list, err := hosts.List(ctx, open(t, cfg), hosts.ListOptions{})
	require.NoError(t, err)
	pg1 := list[0].Server
	require.NotNil(t, pg1, list[0].Error)
	require.Equal(t, hosts.RolePrimary, pg1.Role)
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", primary.Port), pg1.Address)
	require.Len(t, pg1.Standbys, 1)
	require.Equal(t, "streaming", pg1.Standbys[0].State)

	standbyOnly := standby.DSN(db)
	_, err = hosts.SetDSN(ctx, open(t, cfg), "pg1", standbyOnly, hosts.SetDSNOptions{})
	require.ErrorIs(t, err, hosts.ErrNotSameDatabase)
	require.ErrorContains(t, err, "is a standby, in recovery")

	require.NoError(t, standby.Promote(ctx, 2*time.Minute))
	_, err = hosts.SetDSN(ctx, open(t, cfg), "pg1", standbyOnly, hosts.SetDSNOptions{})
	require.ErrorIs(t, err, hosts.ErrNotSameDatabase)
	require.ErrorContains(t, err, "still accepts writes")

	// The failover: the old primary goes away.
	require.NoError(t, primary.Halt())
	start := time.Now()
	var port int
	require.Eventually(t, func() bool {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		port, err = nextID(wctx)
		return err == nil
	}, 3*time.Minute, 200*time.Millisecond, "the router writes again")
	require.Equal(t, standby.Port, port, "on the promoted standby")
	t.Logf("router wrote on the promoted standby %s after the old primary stopped", time.Since(start).Round(time.Millisecond))
	for range 20 {
		port, err := nextID(ctx)
		require.NoError(t, err)
		require.Equal(t, standby.Port, port)
	}

	list, err = hosts.List(ctx, open(t, cfg), hosts.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, hosts.StateOK, list[0].State, list[0].Error)
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", standby.Port), list[0].Server.Address)
	require.Equal(t, hosts.RolePrimary, list[0].Server.Role)

	// Now the only primary: still not set-dsn's, which would skip the
	// counters' advance; the failover points the host at it alone.
	before := snapshot(t, cfg)
	_, err = hosts.SetDSN(ctx, open(t, cfg), "pg1", standbyOnly, hosts.SetDSNOptions{})
	require.ErrorIs(t, err, hosts.ErrNeedsFailover)
	require.Equal(t, before, snapshot(t, cfg), "nothing changed")
	res, err := hosts.Failover(ctx, open(t, cfg), "pg1", hosts.FailoverOptions{To: standbyOnly})
	require.NoError(t, err)
	require.True(t, res.ClusterFile)
	require.Equal(t, int64(2), res.Timeline)
	fileAgrees(t, cfg.Path)
	_, err = r.Reload(ctx)
	require.NoError(t, err)
	for range 20 {
		port, err = nextID(ctx)
		require.NoError(t, err)
		require.Equal(t, standby.Port, port)
	}
}

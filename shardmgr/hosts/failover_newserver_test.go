package hosts

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

// TestFailoverNewServer: a host's database dumped (pg_dump) after rows
// were written through a router and restored (pg_restore) onto another
// server with a system identifier of its own. The failover to it is
// refused, changing nothing: with the new-server option while the old
// server still takes writes, or to the old server itself; and, the old
// one stopped, without the option (the error names another server).
// With it, it is accepted: the catalog records the new DSN and the new
// server's identity, verify finds no failover problem, and writes
// through the refreshed router get ids above every stored one.
func TestFailoverNewServer(t *testing.T) {
	pgtest.Tool(t, "pg_dump") // first, so that a server without one skips before setting up
	pgtest.Tool(t, "pg_restore")
	r := newHostRig(t)
	ctx := r.ctx
	r.router = clustertest.OpenRouter(t, r.cfg)
	acked := r.write(2 * time.Second)
	require.NotEmpty(t, acked)

	dump := clustertest.AsPostgres(t, nil, "pg_dump", "-Fc", "-d", r.primary.DSN("app"))
	// Written after the dump: the restored copy lags what the old server
	// handed out, as a backup does.
	acked = append(acked, r.write(time.Second)...)

	// The new server's clock 30 s behind: its generators would not pull
	// their restored counters past the ids handed out after the dump.
	env, err := localpg.FaketimeEnv(-30 * time.Second)
	require.NoError(t, err)
	next := pgtest.Own(t, localpg.Options{OwnSystemID: true, Env: env})
	_, err = next.CreateDatabase(ctx, "app")
	require.NoError(t, err)
	clustertest.AsPostgres(t, dump, "pg_restore", "--exit-on-error", "--no-owner", "-d", next.DSN("app"))
	nextDSN := next.DSN("app")
	nextConn := clustertest.Pool(t, nextDSN)
	var nextSysID string
	require.NoError(t, nextConn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&nextSysID))

	cat := clustertest.Pool(t, r.cfg.Catalog)
	recorded := func() (dsn, sysid string) {
		require.NoError(t, cat.QueryRow(ctx, `SELECT dsn, system_identifier FROM shardid.hosts WHERE name = 'pg1'`).Scan(&dsn, &sysid))
		return dsn, sysid
	}
	oldDSN, oldSysID := recorded()
	require.NotEqual(t, oldSysID, nextSysID, "the new server shares the old one's system identifier")
	var nextNow time.Time
	require.NoError(t, nextConn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&nextNow))
	require.InDelta(t, -30, time.Until(nextNow).Seconds(), 10, "libfaketime did not set the new server's clock")
	file, err := os.ReadFile(r.path)
	require.NoError(t, err)
	genBefore := clustertest.ClusterMap(t, r.cfg).Generation
	counters := func() []int64 {
		conn, err := pg.Connect(ctx, nextDSN)
		require.NoError(t, err)
		defer conn.Close(context.WithoutCancel(ctx))
		var out []int64
		for _, s := range r.schemas {
			c, err := nextCounter(ctx, conn, s)
			require.NoError(t, err)
			out = append(out, c)
		}
		return out
	}
	refused := func(to string, newServer bool, want error, detail string) {
		t.Helper()
		before := counters()
		_, err := Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: to, NewServer: newServer})
		require.ErrorIs(t, err, want)
		require.ErrorContains(t, err, detail)
		require.NotContains(t, err.Error(), "\n")
		require.Equal(t, genBefore, clustertest.ClusterMap(t, r.cfg).Generation, "the catalog changed")
		dsn, sysid := recorded()
		require.Equal(t, oldDSN, dsn)
		require.Equal(t, oldSysID, sysid)
		now, err := os.ReadFile(r.path)
		require.NoError(t, err)
		require.Equal(t, string(file), string(now), "the cluster file changed")
		require.Equal(t, before, counters(), "the counters moved")
	}

	// Two primaries: the old server still takes writes.
	refused(nextDSN, true, ErrOldServerWritable, "answers as a primary")
	// The old server itself is no new server.
	refused(r.primary.DSN("app"), true, ErrSameServer, "not another server")

	r.primary.KillHard()
	stored := r.storedIDs(nextDSN)
	var maxStored, maxAcked int64
	for id := range stored {
		maxStored = max(maxStored, id)
	}
	for _, id := range acked {
		maxAcked = max(maxAcked, id)
	}
	require.Greater(t, maxAcked, maxStored, "the restored copy lacks no id: the scenario did not happen")

	// Without the option: another server, refused as before.
	refused(nextDSN, false, ErrAnotherServer, "a server the database was restored onto by pg_restore does not")

	res, err := Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: nextDSN, NewServer: true})
	require.NoError(t, err)
	t.Logf("new server: bound %s (%s), advanced %d ms; ids acknowledged %d (the copy has %d), largest acknowledged %d",
		res.Bound.Format(time.RFC3339Nano), res.BoundSource, res.AdvancedMS, len(acked), len(stored), maxAcked)
	require.True(t, res.NewServer)
	require.Equal(t, nextSysID, res.SystemIdentifier)
	require.Equal(t, oldSysID, res.RecordedSystemIdentifier)
	require.Len(t, res.Shards, failoverShards)
	dsn, sysid := recorded()
	require.Equal(t, nextSysID, sysid)
	cfg, err := shardmgr.LoadConfig(r.path)
	require.NoError(t, err)
	h, _ := cfg.Host("pg1")
	require.Equal(t, nextDSN, h.DSN)
	require.Equal(t, h.CatalogDSN(), dsn)
	r.cfg = cfg

	rep, err := verify.Verify(ctx, clustertest.Handle(t, r.cfg), verify.Options{MaxClockSkew: time.Minute})
	require.NoError(t, err)
	require.Empty(t, rep.Failed(verify.CheckFailover))

	_, err = r.router.Reload(ctx)
	require.NoError(t, err)
	l := clustertest.ClusterMap(t, r.cfg).Layout.Resolved()
	perShard := make([]int64, failoverShards)
	for _, id := range acked {
		s := shardschema.ShardOf(l, id)
		perShard[s] = max(perShard[s], id)
	}
	after := r.write(time.Second)
	require.NotEmpty(t, after)
	for _, id := range after {
		require.Greater(t, id, perShard[shardschema.ShardOf(l, id)], "id %d: not above the ids the old server handed out", id)
		require.False(t, stored[id])
	}
}

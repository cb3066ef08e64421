package rebalance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// TestMoveOnlineUnderWritersThroughPgBouncer (issue 28 §1): applications
// write through PgBouncer in transaction mode (every host's app_dsn is a
// PgBouncer in front of its server; the router runs with its defaults)
// while an online move takes one of the shards they write to to another
// host; the operator's move connects directly. Every acknowledged row is
// on the new host afterwards, none lost, no id repeated; the only
// refusals the writers see are the fence's (ErrShardMoving); and they go
// on writing to the shard after the flip, on its new host, through that
// host's PgBouncer (the router followed the map).
func TestMoveOnlineUnderWritersThroughPgBouncer(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	s4 := pgtest.Own(t, localpg.Options{Settings: map[string]string{"wal_retrieve_retry_interval": "100ms"}})
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: s4.DSN("app")})
	require.NoError(t, cfg.ValidateCluster())
	applyHosts(t, cfg)
	servers := append(slices.Clone(pgtest.Servers(t, 3)), s4)
	var bouncers []*localpg.Bouncer
	for i := range cfg.Hosts {
		b := pgtest.Bouncer(t, servers[i], localpg.BouncerOptions{PoolMode: localpg.PoolTransaction, PoolSize: 20})
		cfg.Hosts[i].AppDSN = b.Via(cfg.Hosts[i].DSN)
		bouncers = append(bouncers, b)
	}
	const shard = 2
	from := clustertest.ClusterMap(t, cfg).Shards[shard].Host
	require.NotEqual(t, "pg4", from)

	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	require.Empty(t, r.AppDSNRefused())
	routeLikes(t, r, shard, 2000)
	before := likeIDs(t, cfg, shard)

	stop := make(chan struct{})
	w, wg := runWriters(t, r, []int{shard, shard, 3, 4}, 6, stop)
	time.Sleep(300 * time.Millisecond)
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)})
	w.mu.Lock()
	atFlip := w.rows[shard]
	w.mu.Unlock()
	// Writing on after the flip, until at least 50 more rows of the shard
	// are acknowledged (bounded for a loaded machine).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w.mu.Lock()
		more := w.rows[shard] - atFlip
		w.mu.Unlock()
		if more >= 50 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[shard].Host)

	require.Empty(t, w.failures, "writers through PgBouncer saw only the fence's refusal")
	require.Empty(t, w.dups, "no id repeated")
	require.Positive(t, w.refused, "the cut-over refused some writes, through the pooler")
	require.GreaterOrEqual(t, w.rows[shard]-atFlip, 50, "the writers wrote to the shard after the flip")
	t.Logf("through PgBouncer: %d rows acknowledged (%d to shard %d, %d after the flip), %d refused in a %s window seen by the writers (%d ms in the journal); moved %d rows",
		w.rows[shard]+w.rows[3]+w.rows[4], w.rows[shard], shard, w.rows[shard]-atFlip, w.refused,
		w.last.Sub(w.first).Round(time.Millisecond), res.Refused.Milliseconds(), res.Rows)

	// None lost: every acknowledged id is on the new host, and nothing else.
	want := slices.Clone(before)
	for id, s := range w.ids {
		if s == shard {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	require.Equal(t, want, likeIDs(t, cfg, shard))
	for _, s := range []int{3, 4} {
		require.Len(t, likeIDs(t, cfg, s), w.rows[s])
	}
	requireVerifyOK(t, cfg)

	// The router reaches the shard's new host through pg4's PgBouncer:
	// without it, the shard's writes fail.
	require.NoError(t, bouncers[3].Stop())
	err = r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error { return nil })
	require.Error(t, err, "the shard is served through pg4's PgBouncer")
}

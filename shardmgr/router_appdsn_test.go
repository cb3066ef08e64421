package shardmgr_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
)

// withBouncers gives each host of cfg an app_dsn through a PgBouncer of its
// own in front of its server, in mode; pgtest.Servers(t, 3)[i] is host i's.
func withBouncers(t *testing.T, cfg *shardmgr.Config, mode string) []*localpg.Bouncer {
	t.Helper()
	servers := pgtest.Servers(t, 3)
	var out []*localpg.Bouncer
	for i := range cfg.Hosts {
		// Session pooling gives each client a server of its own: room for
		// the router's whole pool (shardmgr.DefaultHostPoolSize).
		b := pgtest.Bouncer(t, servers[i], localpg.BouncerOptions{PoolMode: mode, PoolSize: 20})
		cfg.Hosts[i].AppDSN = b.Via(cfg.Hosts[i].DSN)
		out = append(out, b)
	}
	return out
}

// Through PgBouncer in transaction mode, a router with its defaults ran
// 18% to 69% of its transactions into "prepared statement stmtcache_...
// already exists / does not exist" (issue 28): a pool on an app_dsn that
// is a pooler runs its queries unprepared. Failed before (the router used
// pgx's statement cache on every DSN). Session pooling works too.
func TestRouterThroughPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{localpg.PoolTransaction, localpg.PoolSession} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			routeThroughPgBouncer(t, mode)
		})
	}
}

func routeThroughPgBouncer(t *testing.T, mode string) {
	cfg := initCluster(t, 8)
	bouncers := withBouncers(t, cfg, mode)
	r := openRouter(t, cfg)
	for id := range r.Shards() {
		require.NoError(t, r.Tx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			_, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY DEFAULT %s, user_id bigint NOT NULL)",
				s.Table("posts"), s.NextID()))
			return err
		}))
	}
	const workers, each = 16, 60
	var failed atomic.Int64
	var mu sync.Mutex
	var errs []error
	ids := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				key := int64(w*each + i)
				shard := r.ShardForKey(key)
				var id, user int64
				err := r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					if err := tx.QueryRow(ctx, "INSERT INTO "+s.Table("posts")+" (user_id) VALUES ($1) RETURNING id", key).Scan(&id); err != nil {
						return err
					}
					return tx.QueryRow(ctx, "SELECT user_id FROM "+s.Table("posts")+" WHERE id = $1", id).Scan(&user)
				})
				if err == nil && user != key {
					err = fmt.Errorf("read user %d back as %d", key, user)
				}
				mu.Lock()
				if err != nil {
					failed.Add(1)
					if len(errs) < 5 {
						errs = append(errs, err)
					}
				} else {
					require.False(t, ids[id], "id %d twice", id)
					ids[id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "transactions failed through PgBouncer, e.g. %v", errs)
	require.Len(t, ids, workers*each)

	// They went through the poolers: without pg2's, its shards fail.
	require.NoError(t, bouncers[1].Stop())
	shard := clusterMap(t, cfg).ShardsOn("pg2")[0]
	err := r.ReadTx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error { return nil })
	require.Error(t, err)
}

// An app_dsn is checked against the catalog's host by what the database
// behind it says: pointed at another host's database (a pooler's entry
// left stale, a typo) the host's shards are refused, reads too, and
// nothing is written there; the other hosts are served. Failed before
// (no app_dsn: the router used the catalog's DSN whatever the file said).
func TestRouterRefusesAnAppDSNThatReachesAnotherDatabase(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 6)
	withBouncers(t, cfg, localpg.PoolTransaction)
	cfg.Hosts[1].AppDSN = cfg.Hosts[0].AppDSN // pg2's app_dsn reaches pg1's database
	r := openRouter(t, cfg)
	require.Equal(t, []string{"pg2"}, r.AppDSNRefused())
	m := clusterMap(t, cfg)
	for _, id := range m.ShardsOn("pg2") {
		err := r.Tx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error { return nil })
		require.ErrorIs(t, err, shardmgr.ErrAppDSN)
		var ae *shardmgr.AppDSNError
		require.ErrorAs(t, err, &ae)
		require.Contains(t, err.Error(), "records itself as host pg1 of cluster "+cfg.Cluster)
		require.ErrorIs(t, r.ReadTx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error { return nil }), shardmgr.ErrAppDSN)
	}
	for _, id := range m.ShardsOn("pg1") {
		require.NoError(t, r.Tx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error { return nil }))
	}
}

// A database that records itself as the host but lives on another server
// than the one the catalog recorded (restored elsewhere, the old cluster
// after a failover to a new server) is refused by its system identifier.
func TestRouterRefusesAnAppDSNOnAnotherServer(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	other := pgtest.Own(t, localpg.Options{OwnSystemID: true})
	dsn := pgtest.NewDB(t, other)
	p := pool(t, dsn)
	_, err := p.Exec(ctx(t), `CREATE SCHEMA shardid; CREATE TABLE shardid.host_info (cluster text, host text)`)
	require.NoError(t, err)
	_, err = p.Exec(ctx(t), `INSERT INTO shardid.host_info VALUES ($1, 'pg2')`, cfg.Cluster)
	require.NoError(t, err)
	b := pgtest.Bouncer(t, other, localpg.BouncerOptions{})
	cfg.Hosts[1].AppDSN = b.Via(dsn)
	r := openRouter(t, cfg)
	shard := clusterMap(t, cfg).ShardsOn("pg2")[0]
	err = r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error { return nil })
	require.ErrorIs(t, err, shardmgr.ErrAppDSN)
	require.Contains(t, err.Error(), "system identifier")
}

package rebalance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// Over TLS with sslmode=verify-full (the servers' certificate signed by a
// CA of the test's own, the role refused without TLS): init, migrate, the
// router, an online move (the target's subscription connects to the
// source with verify-full and the CA), an offline move back and a deep
// verify work; a DSN with another CA is refused before init changes
// anything.
func TestClusterOverVerifyFullTLS(t *testing.T) {
	t.Parallel()
	tls := pgtest.NewTLS(t)
	n := clustertest.DBCounter.Add(1)
	role := fmt.Sprintf("tls_%d", n)
	s1, s2 := tls.Server(t, role), tls.Server(t, role)
	ctx := clustertest.Ctx(t)
	// Without TLS the role is refused: what follows went over TLS.
	pgtest.RequireTLSOnly(t, s1, role)

	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("c%d", n), Shards: 4, Path: "test.yaml", Catalog: tls.DSN(s1, role, fmt.Sprintf("tls%d_catalog", n)),
		Hosts: []shardmgr.Host{{Name: "pg1", DSN: tls.DSN(s1, role, fmt.Sprintf("tls%d_app1", n))}, {Name: "pg2", DSN: tls.DSN(s2, role, fmt.Sprintf("tls%d_app2", n))}}}
	require.NoError(t, cfg.ValidateCluster())

	// Another CA: refused, nothing created.
	other := pgtest.NewTLS(t)
	bad := *cfg
	bad.Catalog = other.DSN(s1, role, fmt.Sprintf("tls%d_catalog", n))
	bad.Hosts = []shardmgr.Host{{Name: "pg1", DSN: other.DSN(s1, role, fmt.Sprintf("tls%d_app1", n))},
		{Name: "pg2", DSN: other.DSN(s2, role, fmt.Sprintf("tls%d_app2", n))}}
	_, err := install.Init(ctx, clustertest.Handle(t, &bad), install.InitOptions{})
	require.ErrorContains(t, err, "certificate")
	var dbs int
	require.NoError(t, clustertest.Pool(t, s1.DSN("postgres")).QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE $1`, fmt.Sprintf("tls%d_%%", n)).Scan(&dbs))
	require.Zero(t, dbs, "nothing created through a certificate of another CA")

	_, err = install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	m := clustertest.ClusterMap(t, cfg)
	shard := 0
	for m.Shards[shard].Host != "pg1" {
		shard++
	}
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, shard, 300)
	before := likeIDs(t, cfg, shard)

	res, err := MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg2", MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)})
	require.NoError(t, err)
	require.Equal(t, MoveOnline, res.Mode)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, "pg2", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
	routeLikes(t, r, shard, 10)
	after := likeIDs(t, cfg, shard)
	require.Len(t, after, 310)
	require.Subset(t, after, before)
	requireVerifyOK(t, cfg)

	// And back, offline.
	res, err = MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg1", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t), Logger: testLogger(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, "pg1", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
	require.Equal(t, after, likeIDs(t, cfg, shard))
	requireVerifyOK(t, cfg)
}

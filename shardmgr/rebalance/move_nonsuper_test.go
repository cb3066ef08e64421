package rebalance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// managedServer starts a server of this test's own with a role as a
// managed service gives its customers: not a superuser, with LOGIN,
// CREATEDB and REPLICATION, a member of pg_create_subscription where the
// server has it (16 and later), and a password it must give (scram, for
// its sessions and its replication connections: PostgreSQL 16 lets a
// non-superuser's subscription connect only with a password the source
// asks for). It returns the server and the role's DSN for database db.
func managedServer(t *testing.T, role, password, db string) (*localpg.Server, string, int) {
	t.Helper()
	ctx := clustertest.Ctx(t)
	s := pgtest.Own(t, localpg.Options{Settings: map[string]string{"wal_retrieve_retry_interval": "100ms"}})
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.Background())
	var version int
	require.NoError(t, admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version))
	q := pgx.Identifier{role}.Sanitize()
	_, err = admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN CREATEDB REPLICATION NOSUPERUSER PASSWORD '%s'`, q, password))
	require.NoError(t, err)
	if version >= 160000 {
		_, err = admin.Exec(ctx, `GRANT pg_create_subscription TO `+q)
		require.NoError(t, err)
	}
	hba := filepath.Join(s.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	require.NoError(t, err)
	rules := fmt.Sprintf("host all %[1]s 127.0.0.1/32 scram-sha-256\nhost replication %[1]s 127.0.0.1/32 scram-sha-256\n", role)
	require.NoError(t, os.WriteFile(hba, append([]byte(rules), old...), 0o600))
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	// The rule holds: without its password the role is refused.
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", role, s.Port))
	if err == nil {
		c.Close(context.Background())
	}
	require.ErrorContains(t, err, "password authentication failed")
	return s, fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", role, password, s.Port, db), version
}

// PostgreSQL 16 lets a role that is not a superuser create subscriptions
// (pg_create_subscription with CREATE on the database): on 16 to 18
// (scripts/test-versions runs this on each bundle) an online move as such
// a role, on servers that ask it for its password, moves the shard with
// every row and verify passes; the move's publication, slot and
// subscription are gone after. Up to 15 only a superuser may subscribe:
// there the online move is refused before anything changes, naming what
// the role lacks, and auto moves offline.
func TestMoveOnlineAsNonSuperuser(t *testing.T) {
	t.Parallel()
	n := clustertest.DBCounter.Add(1)
	role := fmt.Sprintf("managed_%d", n)
	const password = "s3cret-Managed"
	s1, catalog, version := managedServer(t, role, password, fmt.Sprintf("ns%d_catalog", n))
	_, app2, _ := managedServer(t, role, password, fmt.Sprintf("ns%d_app2", n))
	app1 := fmt.Sprintf("ns%d_app1", n)
	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("c%d", n), Shards: 4, Path: "test.yaml", Catalog: catalog,
		Hosts: []shardmgr.Host{
			{Name: "pg1", DSN: fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", role, password, s1.Port, app1)},
			{Name: "pg2", DSN: app2},
		}}
	require.NoError(t, cfg.ValidateCluster())
	ctx := clustertest.Ctx(t)
	_, err := install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	var super bool
	require.NoError(t, clustertest.Pool(t, cfg.Hosts[1].DSN).QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super))
	require.False(t, super)

	m := clustertest.ClusterMap(t, cfg)
	shard := 0
	for m.Shards[shard].Host != "pg1" {
		shard++
	}
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, shard, 500)
	before := likeIDs(t, cfg, shard)
	require.Len(t, before, 500)

	res, err := MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg2", MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)})
	if version < 160000 {
		require.ErrorIs(t, err, ErrPreflight)
		require.ErrorContains(t, err, "superuser")
		require.Equal(t, "pg1", clustertest.ClusterMap(t, cfg).Shards[shard].Host, "nothing changed")
		require.Equal(t, before, likeIDs(t, cfg, shard))
		res, err = MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg2", MoveOptions{Mode: MoveAuto, Migrations: sampleSet(t), Logger: testLogger(t)})
		require.NoError(t, err)
		require.Equal(t, MoveOffline, res.Mode)
	} else {
		require.NoError(t, err)
		require.Equal(t, MoveOnline, res.Mode)
	}
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, "pg2", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
	routeLikes(t, r, shard, 10)
	require.Len(t, likeIDs(t, cfg, shard), 510)
	require.Subset(t, likeIDs(t, cfg, shard), before)
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, res.ID).replName))
	requireVerifyOK(t, cfg)
}

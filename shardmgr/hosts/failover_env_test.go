package hosts

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
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

// failoverAs is a failover end to end where every connection of the
// toolkit is dsn's (a role, a TLS mode): init of one host on primary with
// its catalog on cat, ids drawn on every shard, a standby of primary made
// and, once it replayed them, primary killed and the standby promoted;
// then Failover to it, which must advance every shard past the ids drawn,
// after which the new server's next ids are past them and a deep verify
// passes. onStandby, when not nil, checks the standby before the failover.
func failoverAs(t *testing.T, cat, primary *localpg.Server, dsn func(s *localpg.Server, db string) string, onStandby func(*localpg.Server)) {
	ctx := clustertest.Ctx(t)
	n := clustertest.DBCounter.Add(1)
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "cluster: fe%d\nshards: %d\ncatalog: '%s'\nhosts:\n  - name: pg1\n    dsn: '%s'\n",
		n, failoverShards, dsn(cat, fmt.Sprintf("fe%d_catalog", n)), dsn(primary, "app")), 0o600))
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	_, err = installInit(t, cfg)
	require.NoError(t, err)
	m := clustertest.ClusterMap(t, cfg)

	// draw takes 100 ids from every shard on the server at hostDSN and
	// returns each shard's largest.
	draw := func(hostDSN string) []int64 {
		t.Helper()
		p := clustertest.Pool(t, hostDSN)
		out := make([]int64, len(m.Shards))
		for _, s := range m.Shards {
			require.NoError(t, p.QueryRow(ctx, fmt.Sprintf(`SELECT max(%s()) FROM generate_series(1, 100)`,
				pgx.Identifier{s.Schema, "next_id"}.Sanitize())).Scan(&out[s.ID]))
		}
		return out
	}
	drawn := draw(dsn(primary, "app"))

	standby, err := primary.NewAsyncStandby(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { standby.Stop() })
	require.NoError(t, primary.WaitReplayed(ctx, standby, 2*time.Minute))
	primary.KillHard()
	require.NoError(t, standby.Promote(ctx, 2*time.Minute))
	if onStandby != nil {
		onStandby(standby)
	}

	to := dsn(standby, "app")
	res, err := Failover(ctx, clustertest.Handle(t, cfg), "pg1", FailoverOptions{To: to})
	require.NoError(t, err)
	require.NotNil(t, res.RecordedTimeline)
	require.Greater(t, res.Timeline, *res.RecordedTimeline)
	require.Len(t, res.Shards, failoverShards)
	for _, a := range res.Shards {
		require.Greater(t, a.After, drawn[a.Shard], "shard %d: its next id is not past the ids drawn on the old primary", a.Shard)
	}
	cfg, err = shardmgr.LoadConfig(path)
	require.NoError(t, err)
	h, _ := cfg.Host("pg1")
	require.Equal(t, to, h.DSN, "the cluster file names the new server")
	after := draw(to)
	for s := range after {
		require.Greater(t, after[s], drawn[s], "shard %d", s)
	}
	rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify: %v", rep.Problems)
}

// managedRole creates role on s as a managed service gives its customers
// (not a superuser; LOGIN, CREATEDB; a scram password its sessions must
// give).
func managedRole(t *testing.T, s *localpg.Server, role, password string) {
	t.Helper()
	ctx := clustertest.Ctx(t)
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN CREATEDB NOSUPERUSER PASSWORD '%s'`, pgx.Identifier{role}.Sanitize(), password))
	require.NoError(t, err)
	hba := filepath.Join(s.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hba, append(fmt.Appendf(nil, "host all %s 127.0.0.1/32 scram-sha-256\n", role), old...), 0o600))
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
}

// A failover as a role that is not a superuser (a managed service's:
// LOGIN and CREATEDB, a scram password; the standby is the service's,
// made by its superuser): it reads the promoted server's identity
// (pg_control_system(), PUBLIC's by default), checks the host's record
// and secret, which the role owns, and advances the counters of the
// shards it owns; nothing more is needed (no pg_monitor, no
// REPLICATION).
func TestFailoverAsNonSuperuser(t *testing.T) {
	t.Parallel()
	role := fmt.Sprintf("managed_fo_%d", clustertest.DBCounter.Add(1))
	const password = "s3cret-Managed"
	cat, primary := pgtest.Own(t, localpg.Options{}), pgtest.Own(t, localpg.Options{})
	managedRole(t, cat, role, password)
	managedRole(t, primary, role, password)
	require.False(t, pgtest.Superuser(t, primary.DSN("postgres"), role))
	failoverAs(t, cat, primary, func(s *localpg.Server, db string) string {
		return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", role, password, s.Port, db)
	}, nil)
}

// A failover over TLS with sslmode=verify-full (a CA of the test's own,
// the role refused without TLS on every server, the standby's copied with
// its primary's settings and pg_hba.conf): every connection, to the
// catalog, the old primary and the promoted standby, verifies the
// server's certificate.
func TestFailoverOverVerifyFullTLS(t *testing.T) {
	t.Parallel()
	tls := pgtest.NewTLS(t)
	role := fmt.Sprintf("tls_fo_%d", clustertest.DBCounter.Add(1))
	cat, primary := tls.Server(t, role), tls.Server(t, role)
	pgtest.RequireTLSOnly(t, primary, role)
	failoverAs(t, cat, primary, func(s *localpg.Server, db string) string { return tls.DSN(s, role, db) },
		func(standby *localpg.Server) { pgtest.RequireTLSOnly(t, standby, role) })
}

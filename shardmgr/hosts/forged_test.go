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

// TestSetDSNRefusesAForgedHostRecord: the host's server moved to a new
// address (its old one, a proxy here, answers no more); a non-superuser
// that owns another database on that server forged shardid.host_info
// there (the right cluster, host name and cluster identity), and a
// superuser made a copy of the record without the host's secret. set-dsn
// to either is refused (shardmgr.ErrHostUnproven), nothing changed; to
// the host's own database at the new address it goes through. Before, the
// forged database was accepted and the router wrote there (failed before).
func TestSetDSNRefusesAForgedHostRecord(t *testing.T) {
	ctx := clustertest.Ctx(t)
	server := pgtest.Own(t, localpg.Options{})
	proxy := clustertest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", server.Port))
	base := clustertest.Cluster(t, 2, false)
	db := fmt.Sprintf("sm%d_moved", clustertest.DBCounter.Add(1))
	base.Hosts = base.Hosts[:1]
	base.Hosts[0].DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", proxy.Port, db)
	cfg := initFile(t, base)

	admin := server.DSN("postgres")
	forger := fmt.Sprintf("forger_%d", clustertest.DBCounter.Add(1))
	clustertest.ForgeHostRecord(t, cfg, admin, server.DSN("forged"), "forged", forger, "pg1")
	clustertest.ForgeHostRecord(t, cfg, admin, server.DSN("copied"), "copied", "", "pg1")
	proxy.Close() // the server moved: its old address answers no more

	before := snapshot(t, cfg)
	for _, tc := range []struct{ db, says string }{
		{"forged", fmt.Sprintf("schema shardid belongs to %s", forger)},
		{"copied", "it does not hold the host's secret"},
	} {
		_, err := hosts.SetDSN(ctx, open(t, cfg), "pg1", server.DSN(tc.db), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
		require.ErrorIs(t, err, shardmgr.ErrHostUnproven, tc.db)
		require.ErrorContains(t, err, tc.says)
		require.NotContains(t, err.Error(), "\n")
		require.Equal(t, before, snapshot(t, cfg), "nothing changed")
	}

	// The host's own database, with a trigger an ordinary role put on its
	// shardid.host_secret (TRIGGER granted by mistake): refused too, the
	// planter still no superuser. Failed before: the owners' check looked
	// at the schema and the two tables only.
	planter := fmt.Sprintf("planter_%d", clustertest.DBCounter.Add(1))
	hostAdmin := clustertest.Pool(t, server.DSN(db))
	_, err := hostAdmin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %[1]s LOGIN; CREATE SCHEMA %[1]s AUTHORIZATION %[1]s;
		GRANT USAGE ON SCHEMA shardid TO %[1]s; GRANT TRIGGER ON shardid.host_secret TO %[1]s`, planter))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = clustertest.Pool(t, admin).Exec(context.Background(), `DROP ROLE IF EXISTS `+planter)
	})
	planted, err := pgx.Connect(ctx, clustertest.AsRole(t, server.DSN(db), planter))
	require.NoError(t, err)
	_, err = planted.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION %[1]s.f() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN EXECUTE format('ALTER ROLE %%I SUPERUSER', current_user); RETURN NULL; END $$;
		CREATE TRIGGER planted AFTER INSERT OR UPDATE OR DELETE ON shardid.host_secret FOR EACH STATEMENT EXECUTE FUNCTION %[1]s.f()`, planter))
	require.NoError(t, err)
	require.NoError(t, planted.Close(ctx))
	_, err = hosts.SetDSN(ctx, open(t, cfg), "pg1", server.DSN(db), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
	require.ErrorIs(t, err, shardmgr.ErrHostUnproven)
	require.ErrorIs(t, err, shardmgr.ErrUntrusted)
	require.ErrorContains(t, err, "trigger planted on shardid.host_secret belongs to "+planter)
	require.Equal(t, before, snapshot(t, cfg), "nothing changed")
	var super bool
	require.NoError(t, hostAdmin.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, planter).Scan(&super))
	require.False(t, super)
	_, err = hostAdmin.Exec(ctx, `DROP TRIGGER planted ON shardid.host_secret; REVOKE ALL ON shardid.host_secret FROM `+planter+
		`; REVOKE USAGE ON SCHEMA shardid FROM `+planter+`; DROP SCHEMA `+planter+` CASCADE`)
	require.NoError(t, err)

	res, err := hosts.SetDSN(ctx, open(t, cfg), "pg1", server.DSN(db), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.False(t, res.OldAnswered)
	fileAgrees(t, cfg.Path)
}

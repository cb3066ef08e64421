package hosts_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
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
		{"forged", fmt.Sprintf("schema shardid is owned by %s", forger)},
		{"copied", "it does not hold the host's secret"},
	} {
		_, err := hosts.SetDSN(ctx, open(t, cfg), "pg1", server.DSN(tc.db), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
		require.ErrorIs(t, err, shardmgr.ErrHostUnproven, tc.db)
		require.ErrorContains(t, err, tc.says)
		require.NotContains(t, err.Error(), "\n")
		require.Equal(t, before, snapshot(t, cfg), "nothing changed")
	}

	res, err := hosts.SetDSN(ctx, open(t, cfg), "pg1", server.DSN(db), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.False(t, res.OldAnswered)
	fileAgrees(t, cfg.Path)
}

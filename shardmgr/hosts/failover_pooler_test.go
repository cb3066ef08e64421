package hosts

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// `host failover --to` a DSN that reaches PgBouncer is refused before
// anything changes, as set-dsn refuses one, the message naming app_dsn
// (shardmgr.ErrPooler): recorded, it would break every operator command
// after it. Failed before (refused for another reason, not naming the
// pooler).
func TestFailoverRefusesAPooler(t *testing.T) {
	r := newHostRig(t)
	ctx := r.ctx
	cat := clustertest.Pool(t, r.cfg.Catalog)
	genBefore := clustertest.ClusterMap(t, r.cfg).Generation
	fileBefore, err := os.ReadFile(r.path)
	require.NoError(t, err)
	for _, mode := range []string{localpg.PoolTransaction, localpg.PoolSession} {
		b := pgtest.Bouncer(t, r.primary, localpg.BouncerOptions{PoolMode: mode})
		_, err := Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: b.Via(r.primary.DSN("app"))})
		require.ErrorIs(t, err, shardmgr.ErrPooler, mode)
		require.ErrorContains(t, err, "app_dsn")
		require.NotContains(t, err.Error(), "\n")
		require.Equal(t, genBefore, clustertest.ClusterMap(t, r.cfg).Generation, "the catalog changed")
		var dsn string
		require.NoError(t, cat.QueryRow(ctx, `SELECT dsn FROM shardid.hosts WHERE name = 'pg1'`).Scan(&dsn))
		require.Equal(t, r.primary.DSN("app"), dsn)
		fileAfter, err := os.ReadFile(r.path)
		require.NoError(t, err)
		require.Equal(t, string(fileBefore), string(fileAfter), "the cluster file changed")
	}
}

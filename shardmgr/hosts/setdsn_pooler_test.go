package hosts_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A host's DSN pointed at PgBouncer in front of the host's own database
// passed every check (same database, same server) and was recorded; then
// verify, moves and status broke on it, and the set-dsn back was refused
// (issue 28). It is refused before anything changes, in either pooling
// mode, the message naming app_dsn. Failed before (session pooling was
// accepted and recorded).
func TestSetDSNRefusesAPooler(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initFile(t, clustertest.Cluster(t, 6, false))
	servers := pgtest.Servers(t, 3)
	h, _ := cfg.Host("pg2")
	for _, mode := range []string{localpg.PoolSession, localpg.PoolTransaction} {
		t.Run(mode, func(t *testing.T) {
			b := pgtest.Bouncer(t, servers[1], localpg.BouncerOptions{PoolMode: mode})
			before := snapshot(t, cfg)
			_, err := hosts.SetDSN(ctx, open(t, cfg), "pg2", b.Via(h.DSN), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
			require.ErrorIs(t, err, shardmgr.ErrPooler)
			require.ErrorContains(t, err, "app_dsn")
			require.NotContains(t, err.Error(), "\n")
			require.Equal(t, before, snapshot(t, cfg), "nothing changed")
		})
	}
}

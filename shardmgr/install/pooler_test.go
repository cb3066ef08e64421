package install

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A host's dsn (or the catalog's) through PgBouncer is refused before
// init creates a database or records a DSN, naming app_dsn: the catalog
// would record the pooler and the operator commands after would break on
// its refusals (lock_timeout, replication). Failed before (init went
// ahead through a session-mode pooler).
func TestInitRefusesAPooler(t *testing.T) {
	t.Parallel()
	servers := pgtest.Servers(t, 3)
	cfg := clustertest.Cluster(t, 4, false)
	b := pgtest.Bouncer(t, servers[1], localpg.BouncerOptions{PoolMode: localpg.PoolSession})
	direct := cfg.Hosts[1].DSN
	cfg.Hosts[1].DSN = b.Via(direct)
	_, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.ErrorIs(t, err, shardmgr.ErrPooler)
	require.ErrorContains(t, err, "host pg2: dsn:")
	require.ErrorContains(t, err, "app_dsn")

	// Nothing was created: not the catalog's database, not a host's.
	for _, c := range []struct {
		server *localpg.Server
		dsn    string
	}{{servers[0], cfg.Catalog}, {servers[0], cfg.Hosts[0].DSN}, {servers[1], direct}} {
		pc, err := pgx.ParseConfig(c.dsn)
		require.NoError(t, err)
		var n int
		require.NoError(t, clustertest.Pool(t, c.server.DSN("postgres")).QueryRow(clustertest.Ctx(t),
			`SELECT count(*) FROM pg_database WHERE datname = $1`, pc.Database).Scan(&n))
		require.Zero(t, n, "database %s created", pc.Database)
	}

	// The pooler as the host's app_dsn instead: init goes ahead.
	cfg.Hosts[1].DSN, cfg.Hosts[1].AppDSN = direct, b.Via(direct)
	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
}

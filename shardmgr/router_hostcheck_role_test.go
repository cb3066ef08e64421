package shardmgr_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
)

// TestRouterHostCheckAsRoutingRole: a router that connects to the hosts
// as a role of its own (WithPoolConfig), no superuser, owning nothing.
// init grants it nothing, on the catalog or on the hosts: with only the
// catalog's grants (docs/upgrading.md) it routes, and a host's record it
// may not read leaves a catalog older than the hosts unnoticed there;
// with the hosts' grants docs/operations.md lists (USAGE on schema
// shardid, SELECT on shardid.local_shards) it refuses the shard the hosts
// contradict.
func TestRouterHostCheckAsRoutingRole(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6) // pg1: 0,1  pg2: 2,3  pg3: 4,5
	role := clustertest.Role(t, cfg, "router")
	q := pgx.Identifier{role}.Sanitize()
	exec := func(dsn, sql string) {
		t.Helper()
		_, err := pool(t, dsn).Exec(ctx(t), sql)
		require.NoError(t, err)
	}
	exec(cfg.Catalog, `GRANT USAGE ON SCHEMA shardid TO `+q+`;
		GRANT SELECT ON shardid.cluster, shardid.hosts, shardid.shards, shardid.catalog_migrations, shardid.catalog_readers TO `+q)
	// The catalog as the role; the hosts too: a router connects to a host
	// with the DSN the catalog records (the manager's role, which owns the
	// host's shardid schema and reads it), unless WithPoolConfig says
	// otherwise, as here.
	rcfg := *cfg
	rcfg.Catalog = clustertest.AsRole(t, cfg.Catalog, role)
	asRole := shardmgr.WithPoolConfig(func(_ string, pc *pgxpool.Config) { pc.ConnConfig.User = role })
	// pg2 records shard 0 (pg1's) at a generation the catalog has not
	// reached.
	gen := clusterMap(t, cfg).Generation
	_, err := hostPool(t, cfg, "pg2").Exec(ctx(t), `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES (0, 'shard_0000', 'active', $1)`, gen+3)
	require.NoError(t, err)

	r := openRouter(t, &rcfg, asRole, shardmgr.WithRefreshInterval(0))
	require.Nil(t, r.CatalogStale(), "without the hosts' grants the records are not read")
	require.NoError(t, writeOne(ctx(t), r, 0), "routed as the catalog says")
	var user string
	require.NoError(t, r.Tx(ctx(t), 1, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error {
		return tx.QueryRow(ctx, `SELECT current_user`).Scan(&user)
	}))
	require.Equal(t, role, user)
	r.Close()

	for _, h := range cfg.Hosts {
		exec(h.DSN, `GRANT USAGE ON SCHEMA shardid TO `+q+`; GRANT SELECT ON shardid.local_shards TO `+q)
	}
	r = openRouter(t, &rcfg, asRole, shardmgr.WithRefreshInterval(0))
	e := r.CatalogStale()
	require.NotNil(t, e, "with the hosts' grants the router reads their records")
	require.Equal(t, "pg2", e.Host)
	require.ErrorIs(t, writeOne(ctx(t), r, 0), shardmgr.ErrCatalogStale)
	require.NoError(t, writeOne(ctx(t), r, 1))
}

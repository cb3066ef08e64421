package shardmgr_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
)

// TestRoutesViewForAnyClient: a role with only CONNECT on the catalog
// database and SELECT on shardid.routes and shardid.catalog_readers (what
// docs/routing.md tells a non-Go application to grant) reads where every
// shard lives, as the catalog records it, and nothing else of the catalog.
func TestRoutesViewForAnyClient(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	role := clustertest.Role(t, cfg, "routes")
	q := pgx.Identifier{role}.Sanitize()
	u, err := url.Parse(cfg.Catalog)
	require.NoError(t, err)
	db := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	_, err = pool(t, cfg.Catalog).Exec(ctx(t), `REVOKE CONNECT ON DATABASE `+db+` FROM PUBLIC;
		GRANT CONNECT ON DATABASE `+db+` TO `+q+`;
		GRANT SELECT ON shardid.routes, shardid.catalog_readers TO `+q)
	require.NoError(t, err)

	as := pool(t, clustertest.AsRole(t, cfg.Catalog, role))
	rows, err := as.Query(ctx(t), `SELECT shard, host, dsn, schema_name, state, generation FROM shardid.routes ORDER BY shard`)
	require.NoError(t, err)
	type route struct {
		Shard                        int
		Host, DSN, SchemaName, State string
		Generation                   int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[route])
	require.NoError(t, err)
	m := clusterMap(t, cfg)
	dsns := map[string]string{}
	hrows, err := pool(t, cfg.Catalog).Query(ctx(t), `SELECT name, dsn FROM shardid.hosts`)
	require.NoError(t, err)
	var name, dsn string
	_, err = pgx.ForEachRow(hrows, []any{&name, &dsn}, func() error { dsns[name] = dsn; return nil })
	require.NoError(t, err)
	require.Len(t, got, len(m.Shards))
	for i, s := range m.Shards {
		require.NotEmpty(t, dsns[s.Host])
		require.Equal(t, route{Shard: s.ID, Host: s.Host, DSN: dsns[s.Host], SchemaName: s.Schema, State: string(s.State), Generation: got[i].Generation}, got[i])
		require.Positive(t, got[i].Generation)
		require.LessOrEqual(t, got[i].Generation, m.Generation)
	}
	var minReader int
	require.NoError(t, as.QueryRow(ctx(t), `SELECT min_reader FROM shardid.catalog_readers`).Scan(&minReader))
	require.Positive(t, minReader)

	// Nothing else of the catalog.
	for _, table := range []string{"shardid.shards", "shardid.hosts", "shardid.cluster", "shardid.changes", "shardid.moves"} {
		_, err := as.Exec(ctx(t), `SELECT * FROM `+table)
		require.ErrorContains(t, err, "permission denied", table)
	}
	// And it cannot change the view.
	_, err = as.Exec(ctx(t), `CREATE OR REPLACE VIEW shardid.routes AS SELECT 1`)
	require.Error(t, err)
}

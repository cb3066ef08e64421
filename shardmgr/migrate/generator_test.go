package migrate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

func insertLikes(t testing.TB, p *pgxpool.Pool, schema string, n int) []int64 {
	t.Helper()
	rows, err := p.Query(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s.likes (user_id, post_id) SELECT 1, g FROM generate_series(1, %d) g RETURNING id`, schema, n))
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

func maxID(t testing.TB, p *pgxpool.Pool, table string) int64 {
	t.Helper()
	var mx int64
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT max(id) FROM `+table).Scan(&mx))
	return mx
}

func marker(t testing.TB, p *pgxpool.Pool, schema string) string {
	t.Helper()
	var m string
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT coalesce(obj_description(($1 || '.next_id()')::regprocedure, 'pg_proc'), '')`, schema).Scan(&m))
	return m
}

func TestUpgradeGenerators(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	want := func(id int) string {
		s, err := shsql.Marker(catalog.GeneratorParams(m, id))
		require.NoError(t, err)
		return s
	}

	// Nothing to do on a fresh cluster.
	res, err := migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{})
	require.NoError(t, err)
	up, unchanged, failed := res.Counts()
	require.Equal(t, [3]int{0, 6, 0}, [3]int{up, unchanged, failed})

	// Shard 1 runs Instagram's function (as a cluster made before shardid
	// would), shard 2 an older release's marker; both hold ids ahead of
	// the clock.
	p1, p2 := shardPool(t, cfg, m, 1), shardPool(t, cfg, m, 2)
	insta := catalog.GeneratorParams(m, 1)
	insta.Variant = shsql.Instagram
	ddl, err := shsql.Render(insta)
	require.NoError(t, err)
	_, err = p1.Exec(clustertest.Ctx(t), `DROP FUNCTION shard_0001.next_id() CASCADE`)
	require.NoError(t, err)
	_, err = p1.Exec(clustertest.Ctx(t), ddl, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	_, err = p1.Exec(clustertest.Ctx(t), `ALTER TABLE shard_0001.likes ALTER COLUMN id SET DEFAULT shard_0001.next_id()`)
	require.NoError(t, err)
	insertLikes(t, p1, "shard_0001", 500)
	_, err = p1.Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (id, user_id, post_id) VALUES ($1, 1, 1)`, clustertest.FutureID(1, time.Minute, 1023))
	require.NoError(t, err)
	old1 := marker(t, p1, "shard_0001")
	require.Contains(t, old1, "variant=instagram")

	old2 := want(2)
	old2 = "shardid generator v0" + old2[len("shardid generator v1"):]
	_, err = p2.Exec(clustertest.Ctx(t), fmt.Sprintf(`COMMENT ON FUNCTION shard_0002.next_id() IS '%s'`, old2))
	require.NoError(t, err)
	insertLikes(t, p2, "shard_0002", 500)
	_, err = p2.Exec(clustertest.Ctx(t), `INSERT INTO shard_0002.likes (id, user_id, post_id) VALUES ($1, 1, 1)`, clustertest.FutureID(2, 2*time.Minute, 7))
	require.NoError(t, err)
	before1, before2 := maxID(t, p1, "shard_0001.likes"), maxID(t, p2, "shard_0002.likes")

	// A dry run changes nothing.
	res, err = migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{DryRun: true})
	require.NoError(t, err)
	up, _, _ = res.Counts()
	require.Equal(t, 2, up)
	require.Equal(t, old1, marker(t, p1, "shard_0001"))

	res, err = migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{})
	require.NoError(t, err)
	up, unchanged, failed = res.Counts()
	require.Equal(t, [3]int{2, 4, 0}, [3]int{up, unchanged, failed})
	require.Equal(t, migrate.GeneratorUpgrade{ID: 1, Host: m.Shards[1].Host, From: old1, To: want(1), Upgraded: true, MaxID: before1,
		Columns: []string{"shard_0001.likes.id"}}, res.Shards[1])
	require.Equal(t, before2, res.Shards[2].MaxID)
	require.Equal(t, want(1), marker(t, p1, "shard_0001"))
	require.Equal(t, want(2), marker(t, p2, "shard_0002"))

	// Every id after the upgrade is greater than every id before, and
	// still carries its shard.
	for _, c := range []struct {
		p      *pgxpool.Pool
		schema string
		shard  int
		before int64
	}{{p1, "shard_0001", 1, before1}, {p2, "shard_0002", 2, before2}} {
		ids := insertLikes(t, c.p, c.schema, 2000)
		for _, id := range ids {
			require.Greater(t, id, c.before)
			require.Equal(t, c.shard, defaultShardOf(id))
		}
	}

	// Again: nothing to do; init agrees with the new markers.
	res, err = migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{})
	require.NoError(t, err)
	up, _, _ = res.Counts()
	require.Zero(t, up)
	_, err = install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)

	// A generator for another epoch is not the same generator: refused.
	foreign := catalog.GeneratorParams(m, 3)
	foreign.Epoch = 1
	fm, err := shsql.Marker(foreign)
	require.NoError(t, err)
	p3 := shardPool(t, cfg, m, 3)
	_, err = p3.Exec(clustertest.Ctx(t), fmt.Sprintf(`COMMENT ON FUNCTION shard_0003.next_id() IS '%s'`, fm))
	require.NoError(t, err)
	res, err = migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{})
	var gerr *shardmgr.ShardErrors
	require.ErrorAs(t, err, &gerr)
	require.Len(t, gerr.Errs, 1)
	var failed0 *shardmgr.ShardError
	require.ErrorAs(t, gerr.Errs[0], &failed0)
	require.Equal(t, 3, failed0.Shard)
	require.Contains(t, failed0.Error(), "shard, epoch and layout must not change")
	require.Equal(t, fm, marker(t, p3, "shard_0003"))
	_, _, failed = res.Counts()
	require.Equal(t, 1, failed)
}

// An installation made by an older release with the same generator version
// let PUBLIC execute next_id_advance (and had its one-argument form):
// migrate generator, finding the marker current, still runs the install SQL
// again, which takes it away, and keeps the counter.
func TestUpgradeGeneratorsRevokesPublicAdvance(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 2)
	m := clustertest.ClusterMap(t, cfg)
	p := shardPool(t, cfg, m, 1)
	_, err := p.Exec(clustertest.Ctx(t), `CREATE FUNCTION shard_0001.next_id_advance(min_id bigint) RETURNS bigint
		LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_catalog.setval(''shard_0001.next_id_counter'', min_id >> 13)';
		GRANT EXECUTE ON FUNCTION shard_0001.next_id_advance(bigint, boolean) TO PUBLIC;
		CREATE TABLE shard_0001.likes (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), user_id bigint, post_id bigint)`)
	require.NoError(t, err)
	before := insertLikes(t, p, "shard_0001", 10)

	role := fmt.Sprintf("use_%d", time.Now().UnixNano())
	_, err = p.Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE ROLE %[1]s LOGIN; GRANT USAGE ON SCHEMA shard_0001 TO %[1]s`, role))
	require.NoError(t, err)
	t.Cleanup(func() { p.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	h, _ := cfg.Host(m.Shards[1].Host)
	rc, err := pgx.ParseConfig(h.DSN)
	require.NoError(t, err)
	rc.User = role
	conn, err := pgx.ConnectConfig(clustertest.Ctx(t), rc)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(clustertest.Ctx(t), `SELECT shard_0001.next_id_advance(1, false)`)
	require.NoError(t, err, "the old installation lets PUBLIC advance")

	res, err := migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{})
	require.NoError(t, err)
	up, unchanged, failed := res.Counts()
	require.Equal(t, [3]int{0, 2, 0}, [3]int{up, unchanged, failed})

	for _, q := range []string{`SELECT shard_0001.next_id_advance(1, false)`, `SELECT shard_0001.next_id_advance(1, true)`} {
		_, err = conn.Exec(clustertest.Ctx(t), q)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe, q)
		require.Equal(t, pgerrcode.InsufficientPrivilege, pe.Code, q)
	}
	var oneArg bool
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT to_regprocedure('shard_0001.next_id_advance(bigint)') IS NOT NULL`).Scan(&oneArg))
	require.False(t, oneArg, "the one-argument form is dropped")
	after := insertLikes(t, p, "shard_0001", 10)
	require.Greater(t, after[0], before[len(before)-1], "the counter is kept")
}

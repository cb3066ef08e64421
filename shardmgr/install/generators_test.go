package install

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	shsql "github.com/shardid/shardid/sql"
)

// publicExecutable lists what PUBLIC may run or setval in schema that
// moves the counter: next_id_advance (any argument list) and the
// counter's UPDATE.
func publicExecutable(t *testing.T, p *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := p.Query(clustertest.Ctx(t), `
		SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = $1::regnamespace AND p.proname = 'next_id_advance'
		  AND EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		UNION ALL
		SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'S'
		  AND EXISTS (SELECT FROM aclexplode(coalesce(c.relacl, acldefault('s', c.relowner))) a WHERE a.grantee = 0 AND a.privilege_type = 'UPDATE')
		ORDER BY 1`, schema)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func generatorMarker(t *testing.T, p *pgxpool.Pool, schema string) string {
	t.Helper()
	var marker string
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT coalesce(obj_description(to_regprocedure($1), 'pg_proc'), '')`, schema+".next_id()").Scan(&marker))
	return marker
}

// Issue 18, item 11: a cluster installed by a release whose generator
// (v1, like this one's but for privileges) let PUBLIC execute
// next_id_advance, its one-argument form included. init, with the catalog
// and the markers otherwise current, brings every such shard to this
// release's generator version: nothing PUBLIC may run moves the counter,
// the one-argument form is gone, and the counter is kept past the ids
// stored.
func TestInitUpgradesAnOlderGeneratorVersion(t *testing.T) {
	t.Parallel()
	for _, gen := range []string{shsql.GeneratorPLpgSQL, shsql.GeneratorC} {
		t.Run(gen, func(t *testing.T) {
			t.Parallel()
			if gen == shsql.GeneratorC {
				pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
			}
			testInitUpgradesAnOlderGeneratorVersion(t, gen)
		})
	}
}

// testInitUpgradesAnOlderGeneratorVersion upgrades a v1 generator to this
// release's in the form gen.
func testInitUpgradesAnOlderGeneratorVersion(t *testing.T, gen string) {
	cfg := initCluster(t, 3)
	m, err := shardmgr.ReadMap(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog))
	require.NoError(t, err)
	s := m.Shards[1]
	p := clustertest.HostPool(t, cfg, s.Host)
	want, err := shsql.Marker(catalog.GeneratorParams(m, 1))
	require.NoError(t, err)
	old := strings.Replace(want, fmt.Sprintf("generator v%d ", shsql.Version), fmt.Sprintf("generator v%d ", shsql.Version-1), 1)
	require.NotEqual(t, want, old)
	_, err = p.Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE FUNCTION shard_0001.next_id_advance(min_id bigint) RETURNS bigint
		LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_catalog.setval(''shard_0001.next_id_counter'', min_id >> 13)';
		GRANT EXECUTE ON FUNCTION shard_0001.next_id_advance(bigint, boolean) TO PUBLIC;
		COMMENT ON FUNCTION shard_0001.next_id() IS '%s';
		CREATE TABLE shard_0001.likes (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), v int);
		INSERT INTO shard_0001.likes (v) SELECT generate_series(1, 50)`, old))
	require.NoError(t, err)
	require.Equal(t, []string{"shard_0001.next_id_advance(bigint)", "shard_0001.next_id_advance(bigint,boolean)"}, publicExecutable(t, p, "shard_0001"))
	var before int64
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT max(id) FROM shard_0001.likes`).Scan(&before))
	// The counter rewound too: the upgrade carries it past the stored ids.
	_, err = p.Exec(clustertest.Ctx(t), `SELECT setval('shard_0001.next_id_counter', 1)`)
	require.NoError(t, err)

	cfg.Generator = gen
	res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	var lang string
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT l.lanname FROM pg_proc f JOIN pg_language l ON l.oid = f.prolang
		WHERE f.oid = 'shard_0001.next_id()'::regprocedure`).Scan(&lang))
	require.Equal(t, map[string]string{shsql.GeneratorPLpgSQL: "sql", shsql.GeneratorC: "c"}[gen], lang, "the upgrade installed the %s form", gen)
	require.Equal(t, 1, res.Installed, "the upgraded shard counts as installed")
	require.Equal(t, 2, res.Unchanged)
	require.True(t, res.Changed())

	require.Equal(t, want, generatorMarker(t, p, "shard_0001"), "init brought the shard to this release's generator")
	require.Empty(t, publicExecutable(t, p, "shard_0001"))
	var oneArg bool
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT to_regprocedure('shard_0001.next_id_advance(bigint)') IS NOT NULL`).Scan(&oneArg))
	require.False(t, oneArg, "the one-argument form is dropped")
	var after int64
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (v) VALUES (0) RETURNING id`).Scan(&after))
	require.Greater(t, after, before, "the counter is past every stored id")
	requireVerifyOK(t, cfg)
}

// Issue 18, item 12: privileges of a current generator changed by hand
// (PUBLIC given next_id_advance and setval on the counter) are repaired by
// running init again, which used to skip every shard it found current.
func TestInitReappliesGeneratorPrivileges(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 3)
	m, err := shardmgr.ReadMap(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog))
	require.NoError(t, err)
	p := clustertest.HostPool(t, cfg, m.Shards[2].Host)
	_, err = p.Exec(clustertest.Ctx(t), `GRANT EXECUTE ON FUNCTION shard_0002.next_id_advance(bigint, boolean) TO PUBLIC;
		GRANT UPDATE ON SEQUENCE shard_0002.next_id_counter TO PUBLIC`)
	require.NoError(t, err)
	require.Len(t, publicExecutable(t, p, "shard_0002"), 2)
	var before int64
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT shard_0002.next_id()`).Scan(&before))

	res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.Equal(t, 3, res.Unchanged)
	require.Empty(t, publicExecutable(t, p, "shard_0002"), "init re-applied the generator's privileges")
	var after int64
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT shard_0002.next_id()`).Scan(&after))
	require.Greater(t, after, before, "the counter is kept")
}

// Issue 18, item 10: a role with CREATE on a shard schema (a migration
// role) creates the generator's pull-up before init installs it. init,
// run by a superuser whose CREATE OR REPLACE would keep that role as the
// owner of a SECURITY DEFINER function, refuses the shard, naming the
// object and its owner; the other shards are installed.
func TestInitRefusesGeneratorObjectsOwnedByAnotherRole(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 3)
	m, err := shardmgr.ReadMap(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog))
	require.NoError(t, err)
	p := clustertest.HostPool(t, cfg, m.Shards[0].Host)
	role := fmt.Sprintf("migrator_%d", time.Now().UnixNano())
	_, err = p.Exec(clustertest.Ctx(t), fmt.Sprintf(`DROP SCHEMA shard_0000 CASCADE; CREATE SCHEMA shard_0000;
		CREATE ROLE %[1]s; GRANT USAGE, CREATE ON SCHEMA shard_0000 TO %[1]s;
		SET ROLE %[1]s;
		CREATE FUNCTION shard_0000.next_id_pull_up() RETURNS boolean LANGUAGE sql SECURITY DEFINER AS 'SELECT true';
		CREATE SEQUENCE shard_0000.next_id_counter;
		RESET ROLE`, role))
	require.NoError(t, err)
	t.Cleanup(func() { p.Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", role)) })

	_, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	var se *shardmgr.ShardErrors
	require.True(t, errors.As(err, &se), "%v", err)
	require.Len(t, se.Errs, 1)
	require.ErrorContains(t, se.Errs[0], "shard 0")
	require.ErrorContains(t, se.Errs[0], " is owned by role "+role+", not by postgres")
	require.Regexp(t, `(function shard_0000\.next_id_pull_up\(\)|sequence shard_0000\.next_id_counter) is owned by`, se.Errs[0].Error())
	var owner string
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE oid = 'shard_0000.next_id_pull_up()'::regprocedure`).Scan(&owner))
	require.Equal(t, role, owner, "nothing was replaced")
	require.Empty(t, generatorMarker(t, p, "shard_0000"), "no generator installed over it")
}

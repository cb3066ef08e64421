package rebalance

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// slowIndexMigration makes a table whose expression index costs 0.1 s a
// row to build: with 20 rows, the move's index build (online, after the
// copy) or its COPY into the indexed table (offline) runs about 2 s, past
// the 1 s the databases set below.
const slowIndexMigration = `
CREATE FUNCTION {{.schema}}.slow(x int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $f$
BEGIN PERFORM pg_catalog.pg_sleep(0.1); RETURN x; END $f$;
CREATE TABLE {{.schema}}.things (id bigint PRIMARY KEY DEFAULT {{.next_id}}, n int NOT NULL);
CREATE INDEX things_slow ON {{.schema}}.things ({{.schema}}.slow(n));
`

// setServerTimeouts sets, as a managed service's DBA would, 1 s timeouts
// on every database of cfg (ALTER DATABASE ... SET; transaction_timeout
// on 17+), for sessions that start from now on.
func setServerTimeouts(t *testing.T, cfg *shardmgr.Config) {
	t.Helper()
	for _, dsn := range append([]string{cfg.Catalog}, hostDSNs(cfg)...) {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		db := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
		p := clustertest.Pool(t, dsn)
		major := serverMajor(t, p)
		sets := `ALTER DATABASE ` + db + ` SET statement_timeout = '1s'; ALTER DATABASE ` + db + ` SET idle_in_transaction_session_timeout = '1s'`
		if major >= 17 {
			sets += `; ALTER DATABASE ` + db + ` SET transaction_timeout = '1s'`
		}
		_, err = p.Exec(clustertest.Ctx(t), sets)
		require.NoError(t, err)
	}
	clustertest.Reopen(t, cfg)
}

func hostDSNs(cfg *shardmgr.Config) []string {
	var out []string
	for _, h := range cfg.Hosts {
		out = append(out, h.DSN)
	}
	return out
}

// With statement_timeout, idle_in_transaction_session_timeout and (17+)
// transaction_timeout of 1 s set on every database, as managed services
// do, a shard whose index build takes about 2 s moves online and back
// offline, and verify passes: the move's sessions set their own timeouts.
// Failed before: the online move's index build ended at the database's
// statement_timeout ("canceling statement due to statement timeout").
func TestMoveUnderServerTimeouts(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	addHost(t, cfg, "pg4", "100ms")
	set := setOf(t, map[string]string{"001_slow.sql": slowIndexMigration})
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	const shard = 1
	m := clustertest.ClusterMap(t, cfg)
	from, schema := m.Shards[shard].Host, m.Shards[shard].Schema
	things := pgx.Identifier{schema, "things"}.Sanitize()
	_, err = clustertest.HostPool(t, cfg, from).Exec(clustertest.Ctx(t), `INSERT INTO `+things+` (n) SELECT g FROM generate_series(1, 20) g`)
	require.NoError(t, err)
	setServerTimeouts(t, cfg)

	count := func(host string) int {
		var n int
		require.NoError(t, clustertest.HostPool(t, cfg, host).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM `+things).Scan(&n))
		return n
	}
	for _, step := range []struct {
		mode MoveMode
		to   string
	}{{MoveOnline, "pg4"}, {MoveOffline, from}} {
		start := time.Now()
		_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, step.to, MoveOptions{Mode: step.mode, Migrations: set, Keep: new(time.Duration), Logger: testLogger(t)})
		require.NoError(t, err, step.mode)
		require.Greater(t, time.Since(start), time.Second, "the slow index did not slow the move")
		require.Equal(t, step.to, clustertest.ClusterMap(t, cfg).Shards[shard].Host)
		require.Equal(t, 20, count(step.to))
	}
	requireVerifyOK(t, cfg)
}

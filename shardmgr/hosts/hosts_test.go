package hosts_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// TestListProbesEveryHost: every host with its shards, state and what its
// server says; a host that does not answer is a row saying so.
func TestListProbesEveryHost(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initFile(t, clustertest.Cluster(t, 6, false))
	servers := pgtest.Servers(t, 3)
	// A fourth host in the file only, at an address nothing answers.
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/gone?sslmode=disable&connect_timeout=5", closedPort(t))})
	start := time.Now()
	list, err := hosts.List(ctx, open(t, cfg), hosts.ListOptions{ProbeTimeout: time.Minute})
	require.NoError(t, err)
	require.Len(t, list, 4)
	for i, h := range list[:3] {
		require.Equal(t, fmt.Sprintf("pg%d", i+1), h.Name)
		require.Equal(t, hosts.StateOK, h.State, h.Error)
		require.Equal(t, 2, h.Shards)
		require.Equal(t, fmt.Sprintf("%d-%d", 2*i, 2*i+1), h.Ranges)
		require.Empty(t, h.Mismatch)
		s := h.Server
		require.NotNil(t, s)
		require.Equal(t, hosts.RolePrimary, s.Role)
		require.Equal(t, fmt.Sprintf("127.0.0.1:%d", servers[i].Port), s.Address)
		require.NotEmpty(t, s.SystemID)
		require.NotEmpty(t, s.Version)
		require.Equal(t, cfg.Cluster, s.Cluster)
		require.Equal(t, h.Name, s.Host)
		require.Nil(t, s.ReplayLagMS)
		pc, err := pgconn.ParseConfig(cfg.Hosts[i].DSN)
		require.NoError(t, err)
		require.Equal(t, pc.Database, s.Database)
	}
	gone := list[3]
	require.Equal(t, hosts.StateUnreachable, gone.State)
	require.Nil(t, gone.Server)
	require.Contains(t, gone.Error, "refused")
	require.Equal(t, "host pg4 is not in the catalog", gone.Mismatch)
	require.Less(t, time.Since(start), 5*time.Minute, "bounded by the probe timeout")
}

// TestSetDSNSameDatabaseNewAddress: a host pointed at its own database
// under another DSN (the key=value form here; a new name or port in
// life): catalog and file change together, the generation moves, and a
// running router sends the host's new transactions through the new DSN
// and closes its pool on the old one.
func TestSetDSNSameDatabaseNewAddress(t *testing.T) {
	ctx := clustertest.Ctx(t)
	base := clustertest.Cluster(t, 6, false)
	app := tagHost(base, "pg2")
	cfg := initFile(t, base)
	r := clustertest.OpenRouter(t, cfg, shardmgr.WithPoolConfig(func(_ string, pc *pgxpool.Config) { pc.MinConns = 1 }))
	before := clustertest.ClusterMap(t, cfg).Generation
	h, _ := cfg.Host("pg2")
	requireBackends(t, h.DSN, app, "the router holds a connection on pg2")

	pc, err := pgconn.ParseConfig(h.DSN)
	require.NoError(t, err)
	dsn := fmt.Sprintf("host=%s port=%d dbname=%s user=postgres sslmode=disable application_name=moved", pc.Host, pc.Port, pc.Database)
	res, err := hosts.SetDSN(ctx, open(t, cfg), "pg2", dsn, hosts.SetDSNOptions{})
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.True(t, res.OldAnswered, "the old DSN reaches the same database")
	require.Equal(t, dsn, res.NewDSN)
	require.Equal(t, before+1, res.Generation)
	m := fileAgrees(t, cfg.Path)
	ch, _ := m.Host("pg2")
	require.Equal(t, dsn, ch.DSN)
	require.Equal(t, dsn, res.Config.Hosts[1].DSN)

	changed, err := r.Reload(ctx)
	require.NoError(t, err)
	require.True(t, changed)
	shard := m.ShardsOn("pg2")[0]
	var got string
	require.NoError(t, r.Tx(ctx, shard, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error {
		return tx.QueryRow(ctx, `SELECT current_setting('application_name')`).Scan(&got)
	}))
	require.Equal(t, "moved", got, "new transactions go through the new DSN")
	requireNoBackends(t, h.DSN, app, "the router's pool on the old DSN is closed")

	// A file edited by hand, the catalog not told: set-dsn with the
	// file's DSN updates the catalog.
	cat := clustertest.Pool(t, cfg.Catalog)
	_, err = cat.Exec(ctx, `UPDATE shardid.hosts SET dsn = 'host=elsewhere' WHERE name = 'pg2'`)
	require.NoError(t, err)
	fixed, err := hosts.SetDSN(ctx, open(t, res.Config), "pg2", dsn, hosts.SetDSNOptions{})
	require.NoError(t, err)
	require.True(t, fixed.Changed)
	res = fixed
	fileAgrees(t, cfg.Path)

	// The same DSN again: nothing to do.
	again, err := hosts.SetDSN(ctx, open(t, res.Config), "pg2", dsn, hosts.SetDSNOptions{})
	require.NoError(t, err)
	require.False(t, again.Changed)
	require.Equal(t, res.Generation, clustertest.ClusterMap(t, cfg).Generation)
}

// TestSetDSNRefusals: each DSN that is not the host's database at a new
// address is refused with one error, and neither the file nor the catalog
// changes; its promoted standby too (ErrNeedsFailover: that is Failover's).
func TestSetDSNRefusals(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initFile(t, clustertest.Cluster(t, 6, false))
	servers := pgtest.Servers(t, 3)
	dsnOf := func(name string) *pgconn.Config {
		h, _ := cfg.Host(name)
		pc, err := pgconn.ParseConfig(h.DSN)
		require.NoError(t, err)
		return pc
	}
	kv := func(port uint16, db string) string {
		return fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=postgres sslmode=disable", port, db)
	}
	// A database that records nothing; one of another cluster; and one on
	// another server that records itself as pg2 of this cluster under
	// pg2's own database name (a copy that is not pg2's: the old pg2 still
	// accepts writes).
	empty := pgtest.NewDB(t, servers[2])
	pg2 := dsnOf("pg2")
	clustertest.DropLater(t, servers[2], pg2.Database)
	_, err := servers[2].CreateDatabase(ctx, pg2.Database)
	require.NoError(t, err)
	forge := func(dsn, cluster, host string) {
		p := clustertest.Pool(t, dsn)
		_, err := p.Exec(ctx, `CREATE SCHEMA shardid; CREATE TABLE shardid.host_info (id boolean PRIMARY KEY DEFAULT true, cluster text NOT NULL, host text NOT NULL)`)
		require.NoError(t, err)
		_, err = p.Exec(ctx, `INSERT INTO shardid.host_info (cluster, host) VALUES ($1, $2)`, cluster, host)
		require.NoError(t, err)
	}
	copyOfPg2 := servers[2].DSN(pg2.Database)
	forge(copyOfPg2, cfg.Cluster, "pg2")
	otherCluster := pgtest.NewDB(t, servers[2])
	forge(otherCluster, "elsewhere", "pg2")
	// A server of its own, with its own system identifier, holding a
	// database named as pg2's that records itself as pg2 of this cluster.
	own := pgtest.Own(t, localpg.Options{OwnSystemID: true})
	_, err = own.CreateDatabase(ctx, pg2.Database)
	require.NoError(t, err)
	forge(own.DSN(pg2.Database), cfg.Cluster, "pg2")

	pg3 := dsnOf("pg3")
	for _, tc := range []struct {
		name, host, dsn string
		is              error
		says            string
	}{
		{"unknown host", "pg9", empty, shardmgr.ErrUnknownHost, "pg9"},
		{"DSN that does not parse", "pg2", "postgres://a b:%zz@/x", shardmgr.ErrConfig, "cannot parse DSN"},
		{"nothing answers", "pg2", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", closedPort(t)), hosts.ErrUnreachable, "refused"},
		{"another host's DSN", "pg2", kv(pg3.Port, pg3.Database), shardmgr.ErrConfig, "duplicate DSN"},
		{"another host's database by another name", "pg2", strings.Replace(kv(pg3.Port, pg3.Database), "127.0.0.1", "localhost", 1), hosts.ErrNotSameDatabase, "as host pg3 of cluster " + cfg.Cluster},
		{"a database that records no host", "pg2", empty, hosts.ErrNotSameDatabase, "records no shardid host"},
		{"a host of another cluster", "pg2", otherCluster, hosts.ErrNotSameDatabase, "of cluster elsewhere"},
		{"another server while the old one answers", "pg2", own.DSN(pg2.Database), hosts.ErrNotSameDatabase, "system identifier"},
		{"a second primary beside the old one", "pg2", copyOfPg2, hosts.ErrNotSameDatabase, "still accepts writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, cfg)
			_, err := hosts.SetDSN(ctx, open(t, cfg), tc.host, tc.dsn, hosts.SetDSNOptions{ProbeTimeout: time.Minute})
			require.ErrorIs(t, err, tc.is)
			require.ErrorContains(t, err, tc.says)
			require.NotContains(t, err.Error(), "\n")
			require.Equal(t, before, snapshot(t, cfg), "nothing changed")
		})
	}

	// The host's own server, promoted: a standby made by pg_basebackup -R
	// shares the system identifier, on a newer timeline; with the old
	// primary gone nothing else tells it from a new address of the same
	// server, and its counters may lack ids the old primary handed out.
	t.Run("a promoted standby or another server, the old primary gone", func(t *testing.T) {
		primary := pgtest.Own(t, localpg.Options{})
		standby, err := primary.NewAsyncStandby(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { standby.Stop() })
		base := clustertest.Cluster(t, 2, false)
		db := fmt.Sprintf("sm%d_promoted", clustertest.DBCounter.Add(1))
		base.Hosts = base.Hosts[:1]
		base.Hosts[0].DSN = primary.DSN(db)
		one := initFile(t, base)
		require.NoError(t, primary.WaitReplayed(ctx, standby, 3*time.Minute))
		require.NoError(t, standby.Promote(ctx, 2*time.Minute))
		require.NoError(t, primary.Halt())
		before := snapshot(t, one)
		_, err = hosts.SetDSN(ctx, open(t, one), "pg1", standby.DSN(db), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
		require.ErrorIs(t, err, hosts.ErrNeedsFailover)
		require.ErrorContains(t, err, "on timeline 2, the catalog recorded 1")
		require.NotContains(t, err.Error(), "\n")
		require.Equal(t, before, snapshot(t, one), "nothing changed")

		// Another server altogether (its own system identifier), whose
		// database records itself as pg1: refused too, the old primary
		// gone or not.
		other := pgtest.Own(t, localpg.Options{OwnSystemID: true})
		_, err = other.CreateDatabase(ctx, db)
		require.NoError(t, err)
		forge(other.DSN(db), one.Cluster, "pg1")
		_, err = hosts.SetDSN(ctx, open(t, one), "pg1", other.DSN(db), hosts.SetDSNOptions{ProbeTimeout: time.Minute})
		require.ErrorIs(t, err, hosts.ErrNotSameDatabase)
		require.ErrorContains(t, err, "the catalog recorded")
		require.Equal(t, before, snapshot(t, one), "nothing changed")
	})
}

// TestSetDrain: the drain mark goes to the catalog and the file together,
// comments kept; setting it again changes nothing.
func TestSetDrain(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initFile(t, clustertest.Cluster(t, 6, false))
	gen := clustertest.ClusterMap(t, cfg).Generation
	res, err := hosts.SetDrain(ctx, open(t, cfg), "pg3", true)
	require.NoError(t, err)
	require.True(t, res.Changed && res.Catalog && res.File)
	require.Equal(t, gen+1, res.Generation)
	m := fileAgrees(t, cfg.Path)
	ch, _ := m.Host("pg3")
	require.True(t, ch.Drain)

	again, err := hosts.SetDrain(ctx, open(t, res.Config), "pg3", true)
	require.NoError(t, err)
	require.False(t, again.Changed)
	require.Equal(t, gen+1, clustertest.ClusterMap(t, cfg).Generation)

	back, err := hosts.SetDrain(ctx, open(t, res.Config), "pg3", false)
	require.NoError(t, err)
	require.True(t, back.Changed)
	fileAgrees(t, cfg.Path)
	data, err := os.ReadFile(cfg.Path)
	require.NoError(t, err)
	require.NotContains(t, string(data), "drain", "drain false is written as a file without it")
}

// TestRemove: a host that holds shards, or that an unfinished move
// involves, is refused naming them, nothing changed; an empty host leaves
// the catalog and the file (its database stays), and a running router
// closes its pool.
func TestRemove(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initFile(t, clustertest.Cluster(t, 6, false))
	// pg4 joins once the shards are placed: it holds none.
	servers := pgtest.Servers(t, 3)
	extra := pgtest.NewDB(t, servers[0])
	app := cfg.Cluster + "_pg4"
	f, err := os.OpenFile(cfg.Path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "  - name: pg4\n    dsn: %s&application_name=%s\n", extra, app)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	cfg = reload(t, cfg.Path)
	ic, err := cluster.Open(ctx, cfg)
	require.NoError(t, err)
	_, err = install.Init(ctx, ic, install.InitOptions{})
	ic.Close()
	require.NoError(t, err)
	r := clustertest.OpenRouter(t, cfg, shardmgr.WithPoolConfig(func(_ string, pc *pgxpool.Config) { pc.MinConns = 1 }))
	pg4, _ := cfg.Host("pg4")
	requireBackends(t, pg4.DSN, app, "the router holds a connection on pg4")

	before := snapshot(t, cfg)
	_, err = hosts.Remove(ctx, open(t, cfg), "pg1")
	require.ErrorIs(t, err, hosts.ErrHostInUse)
	require.ErrorContains(t, err, "it holds 2 shards (0-1)")
	require.Equal(t, before, snapshot(t, cfg))

	_, err = hosts.Remove(ctx, open(t, cfg), "pg9")
	require.ErrorIs(t, err, shardmgr.ErrUnknownHost)

	// An unfinished move to pg4, as the journal records one that stopped
	// before its copy (rebalance abort or apply settles it).
	cat := clustertest.Pool(t, cfg.Catalog)
	var id int64
	require.NoError(t, cat.QueryRow(ctx, `INSERT INTO shardid.moves (shard, from_host, to_host, mode, phase, repl_name, schema_name)
		VALUES (0, 'pg1', 'pg4', 'offline', 'planned', 'test_move', 'shard_0000') RETURNING id`).Scan(&id))
	before = snapshot(t, cfg)
	_, err = hosts.Remove(ctx, open(t, cfg), "pg4")
	require.ErrorIs(t, err, hosts.ErrHostInUse)
	require.ErrorContains(t, err, fmt.Sprintf("unfinished moves involve it: move %d (shard 0, pg1 -> pg4) at planned", id))
	require.Equal(t, before, snapshot(t, cfg))
	_, err = cat.Exec(ctx, `UPDATE shardid.moves SET phase = 'aborted' WHERE id = $1`, id)
	require.NoError(t, err)

	// 256 retired copies kept on pg4 (as moves away from it leave them):
	// the refusal names three and counts the rest, one short line (issue
	// 30 §4: it named all 256).
	_, err = cat.Exec(ctx, `INSERT INTO shardid.moves (shard, from_host, to_host, mode, phase, repl_name, schema_name, retired_schema)
		SELECT i % 6, 'pg4', 'pg1', 'offline', 'cleaned', 'test_kept_' || i, format('shard_%s', lpad((i % 6)::text, 4, '0')),
			format('shard_%s_moved_g%s', lpad((i % 6)::text, 4, '0'), i)
		FROM generate_series(1, 256) i`)
	require.NoError(t, err)
	before = snapshot(t, cfg)
	_, err = hosts.Remove(ctx, open(t, cfg), "pg4")
	require.ErrorIs(t, err, hosts.ErrHostInUse)
	require.ErrorContains(t, err, "it keeps the retired copies of move ")
	require.ErrorContains(t, err, " and 253 more (256 in all): drop them")
	require.NotContains(t, err.Error(), "rebalance", "a library error names no command: the CLI's hint does")
	require.Equal(t, 3, strings.Count(err.Error(), "pg4 -> pg1"), err.Error())
	require.Less(t, len(err.Error()), 300, err.Error())
	require.Equal(t, before, snapshot(t, cfg))
	_, err = cat.Exec(ctx, `UPDATE shardid.moves SET retired_dropped_at = now() WHERE repl_name LIKE 'test_kept_%'`)
	require.NoError(t, err)

	gen := clustertest.ClusterMap(t, cfg).Generation
	res, err := hosts.Remove(ctx, open(t, cfg), "pg4")
	require.NoError(t, err)
	require.True(t, res.Changed && res.Catalog && res.File)
	require.Equal(t, gen+1, res.Generation)
	m := fileAgrees(t, cfg.Path)
	_, ok := m.Host("pg4")
	require.False(t, ok)
	require.NoError(t, clustertest.Pool(t, extra).Ping(ctx), "the host's database stays")

	_, err = r.Reload(ctx)
	require.NoError(t, err)
	requireNoBackends(t, pg4.DSN, app, "the router closed the removed host's pool")

	// Init with the file as it is now agrees: nothing to change.
	ir, err := install.Init(ctx, open(t, reload(t, cfg.Path)), install.InitOptions{})
	require.NoError(t, err)
	require.Empty(t, ir.CatalogChanges)
}

// TestListAsApplicationRole: a role that is no superuser lists the hosts
// (the system identifier is readable by any role on PostgreSQL 15; the
// replication lag needs pg_read_all_stats); a host whose record the role
// may not read is reachable, with what it answered and the refusal.
func TestListAsApplicationRole(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cfg := initFile(t, clustertest.Cluster(t, 6, false))
	role := clustertest.Role(t, cfg, "lister")
	q := pgx.Identifier{role}.Sanitize()
	grant := func(dsn, sql string) {
		_, err := clustertest.Pool(t, dsn).Exec(ctx, sql)
		require.NoError(t, err)
	}
	grant(cfg.Catalog, "GRANT USAGE ON SCHEMA shardid TO "+q+"; GRANT SELECT ON ALL TABLES IN SCHEMA shardid, public TO "+q)
	for _, h := range cfg.Hosts[:2] {
		grant(h.DSN, "GRANT USAGE ON SCHEMA shardid TO "+q+"; GRANT SELECT ON shardid.host_info TO "+q)
	}
	as := *cfg
	as.Catalog = clustertest.AsRole(t, cfg.Catalog, role)
	as.Hosts = nil
	for _, h := range cfg.Hosts {
		as.Hosts = append(as.Hosts, shardmgr.Host{Name: h.Name, DSN: clustertest.AsRole(t, h.DSN, role)})
	}
	list, err := hosts.List(ctx, open(t, &as), hosts.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list, 3)
	for _, h := range list[:2] {
		require.Equal(t, hosts.StateOK, h.State)
		require.Empty(t, h.Error)
		require.NotEmpty(t, h.Server.SystemID)
		require.Equal(t, h.Name, h.Server.Host)
	}
	pg3 := list[2]
	require.Equal(t, hosts.StateOK, pg3.State, "reachable, though the role may not read its record")
	require.Contains(t, pg3.Error, "permission denied")
	require.Equal(t, hosts.RolePrimary, pg3.Server.Role)
}

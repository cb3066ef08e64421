package repair

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
	"github.com/shardid/shardid/shardmgr/verify"
)

// Issue 27, item 4: a catalog emptied by a failed restore (its database
// created again, empty) while the hosts hold the cluster's shards, two
// of them moved. init refuses it and creates nothing; verify fails it
// naming the repair; catalog repair --from-hosts rebuilds it from the
// hosts' records: the map as the hosts hold it, the cluster identity the
// hosts record, the hashes of their secrets and the retired copy a move
// kept. Afterwards verify is ok, a router routes every shard (the rows
// written before where it says), set-dsn proves a host by its secret,
// cleanup drops the retired copy and init has nothing to do. Before, the
// repair stopped at "cluster not initialised" and init's hint named the
// repair that could not run.
func TestEmptiedCatalogRebuiltFromHosts(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := withFile(t, installtest.Cluster(t, 6)) // pg1: 0,1  pg2: 2,3  pg3: 4,5
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	r0 := clustertest.OpenRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	written := map[int][]int64{}
	for s := range 6 {
		written[s] = likes(t, r0, s, 10)
	}
	keep, drop := time.Hour, time.Duration(0)
	for _, mv := range []struct {
		shard int
		to    string
		keep  *time.Duration
	}{{0, "pg2", &keep}, {4, "pg1", &drop}} {
		_, err := rebalance.MoveShard(ctx, clustertest.Handle(t, cfg), mv.shard, mv.to, rebalance.MoveOptions{Migrations: set, Keep: mv.keep})
		require.NoError(t, err)
	}
	truth := clustertest.ClusterMap(t, cfg)
	require.Equal(t, []string{"pg2", "pg1", "pg2", "pg2", "pg1", "pg3"}, hostsOf(truth))
	cat := clustertest.Pool(t, cfg.Catalog)
	var identity string
	require.NoError(t, cat.QueryRow(ctx, `SELECT identity::text FROM shardid.cluster`).Scan(&identity))
	secrets := hostSecretHashes(t, cat)
	require.Len(t, secrets, 3)
	var retired string
	require.NoError(t, clustertest.HostPool(t, cfg, "pg1").QueryRow(ctx,
		`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'shard\_0000\_moved\_g%'`).Scan(&retired))
	schemasBefore := map[string][]string{}
	for _, h := range cfg.Hosts {
		schemasBefore[h.Name] = hostSchemas(t, clustertest.HostPool(t, cfg, h.Name))
	}

	emptyCatalog(t, cfg)

	// init refuses, naming what the hosts hold, and creates nothing.
	_, err = install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
	require.ErrorIs(t, err, install.ErrCatalogEmpty)
	require.NotContains(t, err.Error(), "\n")
	require.Empty(t, hostSchemas(t, clustertest.Pool(t, cfg.Catalog)), "init created nothing in the catalog")
	for _, h := range cfg.Hosts {
		require.Equal(t, schemasBefore[h.Name], hostSchemas(t, clustertest.HostPool(t, cfg, h.Name)), "host %s unchanged", h.Name)
	}

	// verify fails it and names the repair.
	rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	named := false
	for _, p := range rep.Problems {
		t.Logf("emptied: %s", p)
		named = named || p.Fix == verify.FixRepairCatalog
	}
	require.True(t, named, "verify names the repair: %v", rep.Problems)

	// The repair: the plan, then applied.
	c := clustertest.Handle(t, cfg)
	plan, err := PlanFromHosts(ctx, c)
	require.NoError(t, err)
	require.True(t, plan.CreateCatalog)
	require.Equal(t, identity, plan.Identity, "the identity the hosts record")
	require.Equal(t, []string{"pg1", "pg2", "pg3"}, plan.AddHosts)
	require.Len(t, plan.Shards, 6)
	for i, s := range plan.Shards {
		require.Equal(t, [3]any{i, truth.Shards[i].Host, truth.Shards[i].Schema}, [3]any{s.Shard, s.To, s.Schema})
	}
	require.Equal(t, []RetiredCopy{{Host: "pg1", Shard: 0, Schema: retired, To: "pg2", Journal: true}}, plan.RetiredCopies)
	require.Empty(t, hostSchemas(t, clustertest.Pool(t, cfg.Catalog)), "the plan changes nothing")
	done, err := FromHosts(ctx, c, plan)
	require.NoError(t, err)
	require.True(t, done.Applied)
	require.Greater(t, done.Generation, plan.HostGeneration)

	fixed := clustertest.ClusterMap(t, cfg)
	require.Equal(t, hostsOf(truth), hostsOf(fixed))
	require.Equal(t, done.Generation, fixed.Generation)
	cat = clustertest.Pool(t, cfg.Catalog)
	var got string
	require.NoError(t, cat.QueryRow(ctx, `SELECT identity::text FROM shardid.cluster`).Scan(&got))
	require.Equal(t, identity, got, "the cluster identity is the hosts'")
	require.Equal(t, secrets, hostSecretHashes(t, cat), "the hosts' secrets' hashes")

	rep, err = verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify after the repair: %v", rep.Problems)

	// Routers: one that ran through it and a new one.
	r1 := clustertest.OpenRouter(t, cfg)
	for range 100 { // its first try meets the sessions the drop ended
		if _, err = r0.Reload(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	for _, r := range []*shardmgr.Router{r0, r1} {
		require.Nil(t, r.CatalogStale())
		for s := range 6 {
			require.NoError(t, writeOne(ctx, r, s), "shard %d", s)
		}
	}
	for s := range 6 {
		require.Subset(t, clustertest.LikeIDs(t, cfg, s), written[s], "shard %d on %s", s, fixed.Shards[s].Host)
	}

	// set-dsn proves the host by its secret (and the server the repair
	// recorded): the same database under another form of its DSN.
	h, _ := cfg.Host("pg2")
	pc, err := pgxpool.ParseConfig(h.DSN)
	require.NoError(t, err)
	cc := pc.ConnConfig
	dsn := fmt.Sprintf("host=%s port=%d dbname=%s user=%s sslmode=disable", cc.Host, cc.Port, cc.Database, cc.User)
	moved, err := hosts.SetDSN(ctx, clustertest.Handle(t, cfg), "pg2", dsn, hosts.SetDSNOptions{})
	require.NoError(t, err, "set-dsn after the repair")
	require.True(t, moved.Changed)

	// The retired copy the repair journaled: kept until cleanup --all.
	cleaned, err := rebalance.Cleanup(ctx, clustertest.Handle(t, moved.Config), rebalance.CleanupOptions{All: true})
	require.NoError(t, err)
	require.Len(t, cleaned.Dropped, 1)
	require.Equal(t, [2]string{"pg1", retired}, [2]string{cleaned.Dropped[0].Host, cleaned.Dropped[0].Schema})

	res, err := install.Init(ctx, clustertest.Handle(t, moved.Config), install.InitOptions{})
	require.NoError(t, err)
	require.False(t, res.Changed(), "init has nothing to do: %+v", res)
	again, err := PlanFromHosts(ctx, clustertest.Handle(t, moved.Config))
	require.NoError(t, err)
	require.True(t, again.Empty(), "%+v", again)
}

// withFile writes cfg as a cluster file (set-dsn edits it) and returns it
// as loaded from there.
func withFile(t *testing.T, cfg *shardmgr.Config) *shardmgr.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: %s\nshards: %d\ncatalog: '%s'\nhosts:\n", cfg.Cluster, cfg.Shards, cfg.Catalog)
	for _, h := range cfg.Hosts {
		fmt.Fprintf(&b, "  - name: %s\n    dsn: '%s'\n", h.Name, h.DSN)
	}
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	loaded, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	return loaded
}

// hostSecretHashes is the catalog's record of the hosts' secrets, by host.
func hostSecretHashes(t *testing.T, cat *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := cat.Query(clustertest.Ctx(t), `SELECT host, encode(secret_sha256, 'hex') FROM shardid.host_secrets`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var h, s string
		require.NoError(t, rows.Scan(&h, &s))
		out[h] = s
	}
	require.NoError(t, rows.Err())
	return out
}

// hostSchemas lists the schemas of a database that are not PostgreSQL's
// own, with their owners.
func hostSchemas(t *testing.T, p *pgxpool.Pool) []string {
	t.Helper()
	rows, err := p.Query(clustertest.Ctx(t), `SELECT n.nspname || ':' || pg_get_userbyid(n.nspowner) FROM pg_namespace n
		WHERE n.nspname NOT LIKE 'pg\_%' AND n.nspname NOT IN ('information_schema', 'public') ORDER BY 1`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

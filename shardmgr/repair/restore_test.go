package repair

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
	"github.com/shardid/shardid/shardmgr/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// restoreCatalog replaces cfg's catalog database with dump (pg_dump
// -Fc), as an operator restores last night's backup: the database
// dropped (its sessions ended), created again and pg_restore'd.
func restoreCatalog(t *testing.T, cfg *shardmgr.Config, dump []byte) {
	t.Helper()
	emptyCatalog(t, cfg)
	clustertest.AsPostgres(t, dump, "pg_restore", "--exit-on-error", "--no-owner", "-d", cfg.Catalog)
}

// emptyCatalog drops cfg's catalog database (its sessions ended) and
// creates it again, empty: what a restore that failed before it wrote
// anything leaves.
func emptyCatalog(t *testing.T, cfg *shardmgr.Config) {
	t.Helper()
	clustertest.Reopen(t, cfg)
	ctx := clustertest.Ctx(t)
	u, err := pgx.ParseConfig(cfg.Catalog)
	require.NoError(t, err)
	db := u.Database
	admin, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", u.Host, u.Port))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `DROP DATABASE `+pgx.Identifier{db}.Sanitize()+` WITH (FORCE)`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{db}.Sanitize())
	require.NoError(t, err)
}

// likes inserts n rows into shard through r and returns their ids.
func likes(t *testing.T, r *shardmgr.Router, shard, n int) []int64 {
	t.Helper()
	var ids []int64
	err := r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		rows, err := tx.Query(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) SELECT g, g %% 100 FROM generate_series(1, $1) g RETURNING id`, s.Table("likes")), n)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	require.NoError(t, err)
	return ids
}

func writeOne(ctx context.Context, r *shardmgr.Router, shard int) error {
	return r.Tx(ctx, shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (1, 1)`, s.Table("likes")))
		return err
	})
}

func schemaRows(t *testing.T, cfg *shardmgr.Config, host, schema string) int {
	t.Helper()
	p := clustertest.HostPool(t, cfg, host)
	if !clustertest.TableExists(t, p, pgx.Identifier{schema, "likes"}.Sanitize()) {
		return -1
	}
	var n int
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM `+pgx.Identifier{schema, "likes"}.Sanitize()).Scan(&n))
	return n
}

// The test: the catalog is dumped, shards move (one to a host the
// dump never saw) and the moves are cleaned up, the dump is restored over
// the catalog. Routers refuse the moved shards (writes and reads) and
// write nothing into a retired copy, verify reports the stale catalog,
// init refuses it, and catalog repair brings back the true map: every row
// written before is where the catalog says, and writes work; the retired
// copy of a move the restored journal never saw is journaled, and
// rebalance cleanup drops it.
func TestRestoredCatalogDetectedAndRepaired(t *testing.T) {
	pgtest.Tool(t, "pg_dump") // first, so that a server without one skips before setting up
	pgtest.Tool(t, "pg_restore")
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := installtest.Cluster(t, 6) // pg1: 0,1  pg2: 2,3  pg3: 4,5
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)

	written := map[int][]int64{}
	r0 := clustertest.OpenRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	for s := range 6 {
		written[s] = append(written[s], likes(t, r0, s, 20)...)
	}

	// Last night's backup.
	dump := clustertest.AsPostgres(t, nil, "pg_dump", "-Fc", "-d", cfg.Catalog)
	require.NotEmpty(t, dump)

	// Today: pg4 joins, shards move, the moves are cleaned up.
	s4 := pgtest.Own(t, localpg.Options{Settings: map[string]string{"wal_retrieve_retry_interval": "100ms"}})
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: s4.DSN("app")})
	require.NoError(t, cfg.ValidateCluster())
	_, err = install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	move := func(shard int, to string) {
		_, err := rebalance.MoveShard(ctx, clustertest.Handle(t, cfg), shard, to, rebalance.MoveOptions{Migrations: set})
		require.NoError(t, err)
	}
	move(0, "pg4")
	move(4, "pg1")
	_, err = rebalance.Cleanup(ctx, clustertest.Handle(t, cfg), rebalance.CleanupOptions{All: true})
	require.NoError(t, err)
	move(2, "pg4") // its retired copy stays on pg2, renamed
	truth := clustertest.ClusterMap(t, cfg)
	require.Equal(t, []string{"pg4", "pg1", "pg4", "pg2", "pg1", "pg3"}, hostsOf(truth))
	for s := range 6 {
		written[s] = append(written[s], likes(t, r0, s, 5)...)
	}
	retired := fmt.Sprintf("shard_0002_moved_g%d", truth.Generation)
	retiredRows := schemaRows(t, cfg, "pg2", retired)
	require.Equal(t, 20, retiredRows, "the retired copy %s on pg2", retired)

	// The catalog is restored from the backup.
	restoreCatalog(t, cfg, dump)
	stale := clustertest.ClusterMap(t, cfg)
	require.Equal(t, []string{"pg1", "pg1", "pg2", "pg2", "pg3", "pg3"}, hostsOf(stale))
	require.Less(t, stale.Generation, truth.Generation)

	// A router opened on the restored catalog, and one that was running
	// and reloads it.
	r1 := clustertest.OpenRouter(t, cfg)
	// Its first try meets the sessions the restore ended.
	for range 100 {
		if _, err = r0.Reload(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	require.Equal(t, stale.Generation, r0.Generation())
	for _, r := range []*shardmgr.Router{r1, r0} {
		require.NotNil(t, r.CatalogStale())
		for _, s := range []int{0, 2, 4} {
			err := writeOne(ctx, r, s)
			require.ErrorIs(t, err, shardmgr.ErrCatalogStale, "shard %d", s)
			var se *shardmgr.CatalogStaleError
			require.ErrorAs(t, err, &se)
			require.Equal(t, s, se.Shards[0].Shard)
			err = r.ReadTx(ctx, s, func(context.Context, pgx.Tx, shardmgr.Shard) error { return nil })
			require.ErrorIs(t, err, shardmgr.ErrCatalogStale, "read shard %d", s)
		}
		for _, s := range []int{1, 3, 5} {
			require.NoError(t, writeOne(ctx, r, s), "shard %d is where the catalog says", s)
		}
	}
	require.Equal(t, retiredRows, schemaRows(t, cfg, "pg2", retired), "nothing written into the retired copy")
	require.Equal(t, -1, schemaRows(t, cfg, "pg1", "shard_0000"), "no copy of shard 0 on pg1")
	require.Equal(t, -1, schemaRows(t, cfg, "pg2", "shard_0002"), "no copy of shard 2 on pg2")
	t.Logf("router: %v", r1.CatalogStale())

	// verify reports it, with the repair.
	rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	staleShards := map[int]bool{}
	for _, p := range rep.Problems {
		if p.Check == verify.CheckCatalogStale {
			require.Equal(t, verify.FixRepairCatalog, p.Fix)
			staleShards[p.Shard] = true
		}
	}
	require.Equal(t, map[int]bool{-1: true, 0: true, 2: true, 4: true}, staleShards, "problems: %v", rep.Problems)

	// init refuses to apply the stale map, and changes nothing.
	_, err = install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
	require.ErrorIs(t, err, shardmgr.ErrCatalogStale)
	require.NotContains(t, err.Error(), "\n")
	require.Equal(t, stale, clustertest.ClusterMap(t, cfg))
	require.Equal(t, -1, schemaRows(t, cfg, "pg1", "shard_0000"), "init installed no copy of shard 0 on pg1")

	// Moves, abort and cleanup refuse it too: they would act by its map
	// and journal.
	_, err = rebalance.MoveShard(ctx, clustertest.Handle(t, cfg), 1, "pg2", rebalance.MoveOptions{Migrations: set})
	require.ErrorIs(t, err, shardmgr.ErrCatalogStale)
	_, err = rebalance.Cleanup(ctx, clustertest.Handle(t, cfg), rebalance.CleanupOptions{All: true})
	require.ErrorIs(t, err, shardmgr.ErrCatalogStale)
	require.Equal(t, stale, clustertest.ClusterMap(t, cfg))

	// The repair: the plan first, then applied.
	c := clustertest.Handle(t, cfg)
	plan, err := PlanFromHosts(ctx, c)
	require.NoError(t, err)
	require.Equal(t, []string{"pg4"}, plan.AddHosts)
	require.Len(t, plan.Shards, 3)
	for i, want := range []struct {
		shard    int
		from, to string
	}{{0, "pg1", "pg4"}, {2, "pg2", "pg4"}, {4, "pg3", "pg1"}} {
		got := plan.Shards[i]
		require.Equal(t, [3]any{want.shard, want.from, want.to}, [3]any{got.Shard, got.From, got.To})
	}
	// The retired copy of shard 2 on pg2 comes from a move the restored
	// journal never saw: the repair journals it, for cleanup to drop.
	require.Equal(t, []RetiredCopy{{Host: "pg2", Shard: 2, Schema: retired, To: "pg4", Journal: true}}, plan.RetiredCopies)
	require.Equal(t, stale, clustertest.ClusterMap(t, cfg), "the plan changes nothing")
	done, err := FromHosts(ctx, c, plan)
	require.NoError(t, err)
	require.True(t, done.Applied)
	require.Greater(t, done.Generation, plan.HostGeneration)
	fixed := clustertest.ClusterMap(t, cfg)
	require.Equal(t, hostsOf(truth), hostsOf(fixed))
	require.Equal(t, done.Generation, fixed.Generation)
	for i := range fixed.Shards {
		require.Equal(t, truth.Shards[i].Schema, fixed.Shards[i].Schema)
		require.Equal(t, shardmgr.StateActive, fixed.Shards[i].State)
	}
	_, ok := fixed.Host("pg4")
	require.True(t, ok)

	// Routers follow: every row written before is where the catalog
	// says, and writes work.
	for _, r := range []*shardmgr.Router{r1, r0} {
		_, err := r.Reload(ctx)
		require.NoError(t, err)
		require.Nil(t, r.CatalogStale())
		for s := range 6 {
			require.NoError(t, writeOne(ctx, r, s), "shard %d", s)
		}
	}
	for s := range 6 {
		ids := clustertest.LikeIDs(t, cfg, s)
		require.Subset(t, ids, written[s], "shard %d on %s", s, fixed.Shards[s].Host)
	}
	// rebalance cleanup drops the retired copy the repair journaled.
	cleaned, err := rebalance.Cleanup(ctx, clustertest.Handle(t, cfg), rebalance.CleanupOptions{})
	require.NoError(t, err)
	require.Len(t, cleaned.Dropped, 1)
	require.Equal(t, [3]any{2, "pg2", retired}, [3]any{cleaned.Dropped[0].Shard, cleaned.Dropped[0].Host, cleaned.Dropped[0].Schema})
	require.Equal(t, -1, schemaRows(t, cfg, "pg2", retired), "the retired copy is gone")
	rep, err = verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	for _, p := range rep.Problems {
		require.NotEqual(t, verify.CheckCatalogStale, p.Check, "%v", rep.Problems)
		t.Logf("after repair: %s", p)
	}
	_, err = install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err, "init accepts the repaired catalog")
	again, err := PlanFromHosts(ctx, clustertest.Handle(t, cfg))
	require.NoError(t, err)
	require.True(t, again.Empty(), "%+v", again)
}

func hostsOf(m *shardmgr.ShardMap) []string {
	out := make([]string, len(m.Shards))
	for i, s := range m.Shards {
		out[i] = s.Host
	}
	return out
}

// Two hosts that both hold one shard live at the same generation: the
// repair cannot tell which copy is the shard's, names them and changes
// nothing.
func TestRepairRefusesUnresolvableConflict(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := installtest.Cluster(t, 6)
	before := clustertest.ClusterMap(t, cfg)
	// pg2 claims shard 0 (pg1's) at pg1's generation, and the catalog
	// looks older than the hosts (pg3 recorded a newer generation), so
	// that there is something to repair.
	var gen int64
	require.NoError(t, clustertest.HostPool(t, cfg, "pg1").QueryRow(ctx, `SELECT generation FROM shardid.local_shards WHERE shard = 0`).Scan(&gen))
	_, err := clustertest.HostPool(t, cfg, "pg2").Exec(ctx, `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES (0, 'shard_0000', 'active', $1)`, gen)
	require.NoError(t, err)
	_, err = clustertest.HostPool(t, cfg, "pg3").Exec(ctx, `UPDATE shardid.local_shards SET generation = generation + 10 WHERE shard = 5`)
	require.NoError(t, err)
	var changes int
	cat := clustertest.Pool(t, cfg.Catalog)
	require.NoError(t, cat.QueryRow(ctx, `SELECT count(*) FROM shardid.changes`).Scan(&changes))

	_, err = FromHosts(ctx, clustertest.Handle(t, cfg), nil)
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrHostsDisagree)
	require.Equal(t, []Conflict{{Shard: 0, Hosts: []string{"pg1", "pg2"}, Generation: gen}}, ce.Conflicts)
	require.Contains(t, err.Error(), "shard 0: hosts pg1 and pg2 both hold it live")
	require.Equal(t, before, clustertest.ClusterMap(t, cfg), "nothing changed")
	var after int
	require.NoError(t, cat.QueryRow(ctx, `SELECT count(*) FROM shardid.changes`).Scan(&after))
	require.Equal(t, changes, after)
	require.False(t, errors.Is(err, ErrChangedSincePlan))
}

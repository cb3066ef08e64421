package repair

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
	"github.com/shardid/shardid/shardmgr/verify"
)

// Issue 27, item 6: a catalog dump taken while a move runs (its journal
// holds the move unfinished, the shard on its source), the move then
// finishes (flipped, cleaned, the source's copy kept renamed for Keep),
// the dump restored over the catalog. The repair places the shard on the
// target and journals the move as finished, not aborted, with its
// retired copy: rebalance cleanup keeps it for the move's keep period and
// drops it with --all. Before, the repair closed the move as aborted and
// forgot the retired copy (cleanup --all dropped nothing; it stayed
// forever).
func TestRestoredMidMoveJournalsTheFinishedMove(t *testing.T) {
	pgtest.Tool(t, "pg_dump") // first, so that a server without one skips before setting up
	pgtest.Tool(t, "pg_restore")
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := installtest.Cluster(t, 6) // pg1: 0,1  pg2: 2,3  pg3: 4,5
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	r := clustertest.OpenRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	written := likes(t, r, 0, 20)

	// The backup is taken as the move starts its copy: the journal holds
	// it at phase schema, the catalog places shard 0 on pg1.
	var dump []byte
	keep := time.Hour
	res, err := rebalance.MoveShard(ctx, clustertest.Handle(t, cfg), 0, "pg2", rebalance.MoveOptions{
		Migrations: set, Keep: &keep,
		Progress: func(p rebalance.MoveProgress) {
			if p.Phase == rebalance.PhaseCopy && dump == nil {
				dump = clustertest.AsPostgres(t, nil, "pg_dump", "-Fc", "-d", cfg.Catalog)
			}
		},
	})
	require.NoError(t, err)
	require.NotEmpty(t, dump, "the dump taken during the move")
	truth := clustertest.ClusterMap(t, cfg)
	require.Equal(t, "pg2", truth.Shards[0].Host)
	var flipGen int64
	cat := clustertest.Pool(t, cfg.Catalog)
	require.NoError(t, cat.QueryRow(ctx, `SELECT flip_generation FROM shardid.moves WHERE id = $1`, res.ID).Scan(&flipGen))
	retired := "shard_0000_moved_g" + itoa(flipGen)
	require.Equal(t, 20, schemaRows(t, cfg, "pg1", retired), "the retired copy %s kept on pg1", retired)
	written = append(written, likes(t, r, 0, 5)...)

	restoreCatalog(t, cfg, dump)
	var phase string
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(ctx, `SELECT phase FROM shardid.moves WHERE id = $1`, res.ID).Scan(&phase))
	require.Equal(t, string(rebalance.PhaseSchema), phase, "the restored journal holds the move unfinished")
	require.Equal(t, "pg1", clustertest.ClusterMap(t, cfg).Shards[0].Host)

	// verify fails the restored catalog, naming the repair.
	rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	named := false
	for _, p := range rep.Problems {
		t.Logf("restored: %s", p)
		if p.Check == verify.CheckCatalogStale && p.Shard == 0 {
			require.Equal(t, verify.FixRepairCatalog, p.Fix)
			named = true
		}
	}
	require.True(t, named, "verify names shard 0 stale: %v", rep.Problems)

	c := clustertest.Handle(t, cfg)
	plan, err := PlanFromHosts(ctx, c)
	require.NoError(t, err)
	require.Len(t, plan.Shards, 1)
	require.Equal(t, [3]any{0, "pg1", "pg2"}, [3]any{plan.Shards[0].Shard, plan.Shards[0].From, plan.Shards[0].To})
	require.Empty(t, plan.CloseMoves, "the move is not aborted")
	require.Equal(t, []FinishedMove{{Move: res.ID, Shard: 0, From: "pg1", To: "pg2", Retired: retired, FlipGeneration: flipGen}}, plan.FinishMoves)
	require.Empty(t, plan.RetiredCopies, "the move's own copy is not journaled twice")
	done, err := FromHosts(ctx, c, plan)
	require.NoError(t, err)
	require.True(t, done.Applied)

	// The journal: the move finished, its retired copy kept until the
	// move's keep period is over.
	cat = clustertest.Pool(t, cfg.Catalog)
	var (
		retiredSchema *string
		gotFlip       *int64
		keepLeft      float64
		finished      bool
	)
	require.NoError(t, cat.QueryRow(ctx, `SELECT phase, retired_schema, flip_generation,
			extract(epoch FROM keep_until - clock_timestamp())::float8, finished_at IS NOT NULL
		FROM shardid.moves WHERE id = $1`, res.ID).Scan(&phase, &retiredSchema, &gotFlip, &keepLeft, &finished))
	require.Equal(t, string(rebalance.PhaseCleaned), phase, "the move is journaled as finished")
	require.NotNil(t, retiredSchema)
	require.Equal(t, retired, *retiredSchema)
	require.NotNil(t, gotFlip)
	require.Equal(t, flipGen, *gotFlip)
	require.True(t, finished)
	require.Greater(t, keepLeft, (50 * time.Minute).Seconds(), "the move's keep period (1h) is kept")
	var moves int
	require.NoError(t, cat.QueryRow(ctx, `SELECT count(*) FROM shardid.moves WHERE shard = 0`).Scan(&moves))
	require.Equal(t, 1, moves, "one journal row for the one move")

	fixed := clustertest.ClusterMap(t, cfg)
	require.Equal(t, "pg2", fixed.Shards[0].Host)
	require.Equal(t, shardmgr.StateActive, fixed.Shards[0].State)
	// Its first tries meet the catalog sessions the restore ended (as in
	// TestRestoredCatalogDetectedAndRepaired).
	for range 100 {
		if _, err = r.Reload(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	require.NoError(t, writeOne(ctx, r, 0))
	require.Subset(t, clustertest.LikeIDs(t, cfg, 0), written)

	// cleanup keeps the copy for the keep period, and --all drops it.
	cleaned, err := rebalance.Cleanup(ctx, clustertest.Handle(t, cfg), rebalance.CleanupOptions{})
	require.NoError(t, err)
	require.Empty(t, cleaned.Dropped)
	require.Len(t, cleaned.KeptCopies, 1)
	require.Equal(t, [3]any{res.ID, "pg1", retired}, [3]any{cleaned.KeptCopies[0].MoveID, cleaned.KeptCopies[0].Host, cleaned.KeptCopies[0].Schema})
	cleaned, err = rebalance.Cleanup(ctx, clustertest.Handle(t, cfg), rebalance.CleanupOptions{All: true})
	require.NoError(t, err)
	require.Len(t, cleaned.Dropped, 1)
	require.Equal(t, [3]any{res.ID, "pg1", retired}, [3]any{cleaned.Dropped[0].MoveID, cleaned.Dropped[0].Host, cleaned.Dropped[0].Schema})
	require.Equal(t, -1, schemaRows(t, cfg, "pg1", retired), "the retired copy is gone")

	rep, err = verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify after the repair: %v", rep.Problems)
	again, err := PlanFromHosts(ctx, clustertest.Handle(t, cfg))
	require.NoError(t, err)
	require.True(t, again.Empty(), "%+v", again)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

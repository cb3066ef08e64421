package shardmgr_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/logbuf"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// requireHostSaid asserts that err is a *ShardError about shard on host
// whose cause is the host's SQLSTATE code.
func requireHostSaid(t testing.TB, err error, shard int, host, code string) {
	t.Helper()
	var se *shardmgr.ShardError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, shard, se.Shard)
	require.Equal(t, host, se.Host)
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "the host's error is kept as the cause: %v", err)
	require.Equal(t, code, pe.Code, "%v", err)
}

func TestOutdatedRouterAfterMoveGetsErrShardMoving(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	_, err := migrate.Migrate(ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	const shard = 1
	// Routers that never refresh on their own: their maps stay at the
	// generation before the move, like any router between the flip and its
	// next refresh.
	writer := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1))
	gen := writer.Generation()
	from := writer.Map().Shards[shard].Host
	to := "pg3"
	require.NotEqual(t, from, to)
	generator := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1))
	reader := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1))
	routeLikes(t, writer, shard, 10)

	res, err := rebalance.MoveShard(ctx(t), clustertest.Handle(t, cfg), shard, to, rebalance.MoveOptions{Mode: rebalance.MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, rebalance.PhaseCleaned, res.Phase)
	require.NotEmpty(t, res.RetiredSchema, "the source's schema was renamed")

	insert := func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (1, 1)`, s.Table("likes")))
		return err
	}
	nextID := func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		var id int64
		return tx.QueryRow(ctx, "SELECT "+s.NextID()).Scan(&id)
	}
	count := func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		var n int64
		return tx.QueryRow(ctx, "SELECT count(*) FROM "+s.Table("likes")).Scan(&n)
	}
	for _, c := range []struct {
		name  string
		r     *shardmgr.Router
		write bool
		fn    func(context.Context, pgx.Tx, shardmgr.Shard) error
		code  string // what the old host says
	}{
		{"insert into a table of the renamed schema", writer, true, insert, pgerrcode.UndefinedTable},
		{"the generator of the renamed schema", generator, true, nextID, pgerrcode.InvalidSchemaName},
		{"a read of the renamed schema", reader, false, count, pgerrcode.UndefinedTable},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, gen, c.r.Generation(), "the router's map predates the flip")
			run := c.r.ReadTx
			if c.write {
				run = c.r.Tx
			}
			err := run(ctx(t), shard, c.fn)
			require.ErrorIs(t, err, shardmgr.ErrShardMoving)
			requireHostSaid(t, err, shard, from, c.code)

			// The router reloaded its map: the retry goes to the new host.
			require.Equal(t, res.Generation, c.r.Generation())
			var host string
			require.NoError(t, run(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
				host = s.Host
				return c.fn(ctx, tx, s)
			}))
			require.Equal(t, to, host)
		})
	}
	require.Len(t, likeIDs(t, cfg, shard), 11, "the retried insert is on the new host")

	// The same errors from a shard that did not move are the host's own.
	stay := 0
	require.Equal(t, writer.Map().Shards[stay].Host, clusterMap(t, cfg).Shards[stay].Host)
	err = writer.Tx(ctx(t), stay, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+s.Table("no_such_table")+" VALUES (1)")
		return err
	})
	require.NotErrorIs(t, err, shardmgr.ErrShardMoving)
	requireHostSaid(t, err, stay, writer.Map().Shards[stay].Host, pgerrcode.UndefinedTable)
}

func TestRouterFencedCopyIsErrShardMoving(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	_, err := migrate.Migrate(ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1))
	const shard = 2
	s, err := r.Shard(shard)
	require.NoError(t, err)
	// A fence as a move's cut-over raises it on the source, the catalog
	// not (yet) saying moving.
	require.NoError(t, fence.Install(ctx(t), hostPool(t, cfg, s.Host), s.Schema, true))

	err = r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (1, 1)`, s.Table("likes")))
		return err
	})
	require.ErrorIs(t, err, shardmgr.ErrShardMoving)
	requireHostSaid(t, err, shard, s.Host, fence.SQLState)

	// Wrapped by the caller's function, it is still recognised.
	err = r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s`, s.Table("likes")))
		return fmt.Errorf("clean likes: %w", err)
	})
	require.ErrorIs(t, err, shardmgr.ErrShardMoving)

	// Reads of a fenced copy go on.
	require.NoError(t, r.ReadTx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		var n int64
		return tx.QueryRow(ctx, "SELECT count(*) FROM "+s.Table("likes")).Scan(&n)
	}))
}

// ownCatalogCluster is initCluster with the catalog on a server of this
// test's own, which the test may halt while the hosts stay up.
func ownCatalogCluster(t testing.TB, shards int) (*shardmgr.Config, *localpg.Server) {
	t.Helper()
	cfg := testCluster(t, shards, false)
	cat := pgtest.Own(t, localpg.Options{})
	cfg.Catalog = cat.DSN("catalog")
	require.NoError(t, cfg.ValidateCluster())
	_, err := install.Init(ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	return cfg, cat
}

func TestRouterServesThroughCatalogOutage(t *testing.T) {
	t.Parallel()
	const shards = 6
	cfg, cat := ownCatalogCluster(t, shards)
	_, err := migrate.Migrate(ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	var logs logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Both check the catalog on every call: the most a router could
	// hammer it.
	patient := openRouter(t, cfg, shardmgr.WithRefreshInterval(0), shardmgr.WithLogger(log))
	const bound = 300 * time.Millisecond
	strict := openRouter(t, cfg, shardmgr.WithRefreshInterval(0), shardmgr.WithMaxUnconfirmed(bound), shardmgr.WithLogger(log))

	insert := func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (1, 1)`, s.Table("likes")))
		return err
	}
	count := func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		var n int64
		return tx.QueryRow(ctx, "SELECT count(*) FROM "+s.Table("likes")).Scan(&n)
	}
	for id := range shards {
		require.NoError(t, patient.Tx(ctx(t), id, insert))
		require.NoError(t, strict.Tx(ctx(t), id, insert))
	}
	require.Zero(t, patient.UnconfirmedFor())
	require.Zero(t, strict.UnconfirmedFor())

	require.NoError(t, cat.Halt())
	checksBefore := shardmgr.CatalogChecks(patient)
	outage := time.Now()
	calls, refused := 0, 0
	for time.Since(outage) < 3*time.Second {
		for id := range shards {
			require.NoError(t, patient.Tx(ctx(t), id, insert), "writes to healthy hosts go on")
			require.NoError(t, patient.ReadTx(ctx(t), id, count))
			require.NoError(t, strict.ReadTx(ctx(t), id, count), "reads go on past the bound")
			unconfirmed := strict.UnconfirmedFor() > bound
			err := strict.Tx(ctx(t), id, insert)
			if unconfirmed {
				require.ErrorIs(t, err, shardmgr.ErrMapUnconfirmed)
				require.ErrorIs(t, err, shardmgr.ErrMapStale, "the deprecated name still matches")
				require.ErrorContains(t, err, "shard map unconfirmed: ")
				var se *shardmgr.ShardError
				require.True(t, errors.As(err, &se), "%v", err)
				require.Equal(t, id, se.Shard)
				refused++
			} else if err != nil {
				require.ErrorIs(t, err, shardmgr.ErrMapUnconfirmed)
			}
			calls += 4
		}
	}
	require.Greater(t, refused, 0, "writes past the bound were refused")
	require.Greater(t, patient.UnconfirmedFor(), 2*time.Second)
	checks := shardmgr.CatalogChecks(patient) - checksBefore
	t.Logf("%d calls, %d catalog checks by one router, %d writes refused by the strict one", calls, checks, refused)
	require.Less(t, checks, int64(15), "retries back off instead of following every call")
	require.Contains(t, logs.String(), "catalog unreachable; serving from the last map")
	require.Contains(t, logs.String(), "refusing writes until the catalog answers")

	require.NoError(t, cat.Restart(ctx(t)))
	for _, r := range []*shardmgr.Router{patient, strict} {
		require.Eventually(t, func() bool {
			return r.ReadTx(ctx(t), 0, count) == nil && r.UnconfirmedFor() == 0
		}, 2*time.Minute, 20*time.Millisecond, "the map is confirmed once the catalog is back")
		for id := range shards {
			require.NoError(t, r.Tx(ctx(t), id, insert))
		}
	}
	require.Contains(t, logs.String(), "catalog reachable again")

	// A change made after the outage reaches both routers.
	gen, err := catalog.SetShardState(ctx(t), pool(t, cfg.Catalog), 0, shardmgr.StateReadOnly, 0)
	require.NoError(t, err)
	for _, r := range []*shardmgr.Router{patient, strict} {
		require.ErrorIs(t, r.Tx(ctx(t), 0, insert), shardmgr.ErrShardReadOnly)
		require.Equal(t, gen, r.Generation())
	}
}

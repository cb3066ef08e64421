package shardmgr_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	shcatalog "github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// A shard marked moving: without WithRetryMoving, Tx says ErrShardMoving
// at once; with it, Tx waits and succeeds once the shard is active again
// (the router reloads the map itself, though it never refreshes on its
// own); while the shard stays moving, it gives up after its bound with
// ErrShardMoving. A read-only shard is not retried.
func TestRouterRetryMoving(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	catalog := pool(t, cfg.Catalog)
	nop := func(context.Context, pgx.Tx, shardmgr.Shard) error { return nil }
	plain := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1))
	retrying := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1), shardmgr.WithRetryMoving(2*time.Minute))
	short := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1), shardmgr.WithRetryMoving(300*time.Millisecond))

	_, err := shcatalog.SetShardState(ctx(t), catalog, 2, shardmgr.StateMoving, 0)
	require.NoError(t, err)
	for _, r := range []*shardmgr.Router{plain, retrying, short} {
		_, err := r.Reload(ctx(t))
		require.NoError(t, err)
	}
	require.ErrorIs(t, plain.Tx(ctx(t), 2, nop), shardmgr.ErrShardMoving)

	start := time.Now()
	err = short.Tx(ctx(t), 2, nop)
	require.ErrorIs(t, err, shardmgr.ErrShardMoving)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "retried for its bound")

	var runs atomic.Int32
	done := make(chan error, 1)
	start = time.Now()
	go func() {
		done <- retrying.Tx(ctx(t), 2, func(context.Context, pgx.Tx, shardmgr.Shard) error { runs.Add(1); return nil })
	}()
	time.Sleep(700 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Tx returned while the shard was moving: %v", err)
	default:
	}
	_, err = shcatalog.SetShardState(ctx(t), catalog, 2, shardmgr.StateActive, 0)
	require.NoError(t, err)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("Tx did not return within 2 minutes of the shard becoming active")
	}
	require.GreaterOrEqual(t, time.Since(start), 700*time.Millisecond)
	require.EqualValues(t, 1, runs.Load(), "fn ran once: the refused tries never reached it")

	_, err = shcatalog.SetShardState(ctx(t), catalog, 1, shardmgr.StateReadOnly, 0)
	require.NoError(t, err)
	_, err = retrying.Reload(ctx(t))
	require.NoError(t, err)
	start = time.Now()
	require.ErrorIs(t, retrying.Tx(ctx(t), 1, nop), shardmgr.ErrShardReadOnly)
	require.Less(t, time.Since(start), time.Minute, "read-only is not waited for")
}

// During a real offline move (the source fenced, then the map flipped),
// writers with WithRetryMoving never see ErrShardMoving: every insert
// lands, on the new host once the move is done.
func TestRouterRetryMovingThroughAMove(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	_, err := migrate.Migrate(ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	const shard = 1
	to := "pg3"
	require.NotEqual(t, to, clusterMap(t, cfg).Shards[shard].Host)
	r := openRouter(t, cfg, shardmgr.WithRetryMoving(2*time.Minute))
	routeLikes(t, r, shard, 200)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var inserted atomic.Int64
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (7, 7)`, s.Table("likes")))
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				inserted.Add(1)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	res, err := rebalance.MoveShard(ctx(t), clustertest.Handle(t, cfg), shard, to, rebalance.MoveOptions{Mode: rebalance.MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, rebalance.PhaseCleaned, res.Phase)
	time.Sleep(300 * time.Millisecond) // writes on the new host
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a writer with WithRetryMoving saw an error during the move")
	}
	require.Equal(t, to, clusterMap(t, cfg).Shards[shard].Host)
	require.Len(t, likeIDs(t, cfg, shard), 200+int(inserted.Load()), "every acknowledged insert is on the new host")
}

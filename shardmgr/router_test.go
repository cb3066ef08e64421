package shardmgr_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	shcatalog "github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

func TestRouterByKeyAndByID(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 8)
	r, err := shardmgr.Open(ctx(t), cfg)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, 8, r.Shards())
	require.EqualValues(t, 1, r.Generation())

	for id := range r.Shards() {
		require.NoError(t, r.Tx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			_, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY DEFAULT %s, user_id bigint NOT NULL)",
				s.Table("posts"), s.NextID()))
			return err
		}))
	}

	for _, key := range []int64{0, 1, 7, 8, 13, 1 << 40, -1} {
		shard := r.ShardForKey(key)
		require.Equal(t, int(uint64(key)%8), shard)
		var id idgen.ID
		require.NoError(t, r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			return tx.QueryRow(ctx, "INSERT INTO "+s.Table("posts")+" (user_id) VALUES ($1) RETURNING id", key).Scan(&id)
		}))
		byID, err := r.ShardForID(id)
		require.NoError(t, err)
		require.Equal(t, shard, byID)

		conn, s, err := r.Acquire(ctx(t), byID)
		require.NoError(t, err)
		var user int64
		require.NoError(t, conn.QueryRow(ctx(t), "SELECT user_id FROM "+s.Table("posts")+" WHERE id = $1", id).Scan(&user))
		conn.Release()
		require.Equal(t, key, user)
		require.Equal(t, r.Map().Shards[shard].Host, s.Host)
	}

	_, err = r.Shard(8)
	require.ErrorIs(t, err, shardmgr.ErrUnknownShard)
	_, err = r.ShardForID(idgen.ID(9) << 10) // carries shard 9 of 8
	require.ErrorIs(t, err, shardmgr.ErrUnknownShard)
	_, err = r.ShardForID(-5)
	require.ErrorIs(t, err, shardmgr.ErrUnknownShard)
	require.ErrorIs(t, r.Tx(ctx(t), -1, nil), shardmgr.ErrUnknownShard)
}

func TestRouterRefusesReadOnlyAndMovingShards(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	r, err := shardmgr.Open(ctx(t), cfg, shardmgr.WithRefreshInterval(0))
	require.NoError(t, err)
	defer r.Close()
	catalog := pool(t, cfg.Catalog)
	nop := func(context.Context, pgx.Tx, shardmgr.Shard) error { return nil }

	gen, err := shcatalog.SetShardState(ctx(t), catalog, 1, shardmgr.StateReadOnly, r.Generation())
	require.NoError(t, err)
	require.EqualValues(t, 2, gen)
	_, err = shcatalog.SetShardState(ctx(t), catalog, 2, shardmgr.StateMoving, gen)
	require.NoError(t, err)

	err = r.Tx(ctx(t), 1, nop)
	require.ErrorIs(t, err, shardmgr.ErrShardReadOnly)
	var se *shardmgr.ShardError
	require.True(t, errors.As(err, &se))
	require.Equal(t, 1, se.Shard)
	require.Equal(t, "pg1", se.Host)
	require.ErrorIs(t, r.Tx(ctx(t), 2, nop), shardmgr.ErrShardMoving)
	require.EqualValues(t, 3, r.Generation(), "the router reloaded the map")

	// Reads still work; other shards still take writes.
	require.NoError(t, r.ReadTx(ctx(t), 1, nop))
	require.NoError(t, r.ReadTx(ctx(t), 2, nop))
	require.NoError(t, r.Tx(ctx(t), 0, nop))
	require.Error(t, r.ReadTx(ctx(t), 0, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, "CREATE TABLE "+s.Table("nope")+" (x int)")
		return err
	}), "a read transaction refuses writes")

	_, err = shcatalog.SetShardState(ctx(t), catalog, 1, shardmgr.StateActive, 0)
	require.NoError(t, err)
	require.NoError(t, r.Tx(ctx(t), 1, nop))

	_, err = shcatalog.SetShardState(ctx(t), catalog, 9, shardmgr.StateActive, 0)
	require.ErrorIs(t, err, shardmgr.ErrUnknownShard)
	_, err = shcatalog.SetShardState(ctx(t), catalog, 0, shardmgr.State("frozen"), 0)
	require.Error(t, err)
}

func TestRouterWithoutRefreshWaitsForReload(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 2)
	r, err := shardmgr.Open(ctx(t), cfg, shardmgr.WithRefreshInterval(-1))
	require.NoError(t, err)
	defer r.Close()
	nop := func(context.Context, pgx.Tx, shardmgr.Shard) error { return nil }
	_, err = shcatalog.SetShardState(ctx(t), pool(t, cfg.Catalog), 0, shardmgr.StateReadOnly, 0)
	require.NoError(t, err)
	require.NoError(t, r.Tx(ctx(t), 0, nop), "stale map until Reload")
	changed, err := r.Reload(ctx(t))
	require.NoError(t, err)
	require.True(t, changed)
	require.ErrorIs(t, r.Tx(ctx(t), 0, nop), shardmgr.ErrShardReadOnly)
}

func TestRouterOpenCatalog(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 3)
	r, err := shardmgr.OpenCatalog(ctx(t), cfg.Catalog)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.Tx(ctx(t), 2, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		var id int64
		return tx.QueryRow(ctx, "SELECT "+s.NextID()).Scan(&id)
	}))
}

func TestTwoManagersCannotBothWin(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	catalog := pool(t, cfg.Catalog)
	const managers = 8
	var wg sync.WaitGroup
	errs := make([]error, managers)
	for i := range managers {
		wg.Go(func() {
			state := shardmgr.StateReadOnly
			if i%2 == 0 {
				state = shardmgr.StateMoving
			}
			_, errs[i] = shcatalog.SetShardState(context.Background(), catalog, i%4, state, 1)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		var ge *shardmgr.GenerationError
		require.True(t, errors.As(err, &ge), "%v", err)
		require.ErrorIs(t, err, shardmgr.ErrGenerationChanged)
		require.EqualValues(t, 2, ge.Got)
	}
	require.Equal(t, 1, won)
	gen, err := shcatalog.Generation(ctx(t), catalog)
	require.NoError(t, err)
	require.EqualValues(t, 2, gen)
}

func TestConcurrentInitCreatesOnce(t *testing.T) {
	t.Parallel()
	cfg := testCluster(t, 16, true)
	var wg sync.WaitGroup
	res := make([]*install.InitResult, 3)
	errs := make([]error, 3)
	for i := range res {
		wg.Go(func() {
			res[i], errs[i] = install.Init(context.Background(), clustertest.Handle(t, cfg), install.InitOptions{})
		})
	}
	wg.Wait()
	created := 0
	for i := range res {
		require.NoError(t, errs[i])
		require.EqualValues(t, 1, res[i].Generation)
		if res[i].CatalogCreated {
			created++
		}
	}
	require.Equal(t, 1, created)
	rep, err := verify.Verify(ctx(t), clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
}

func TestRouterConcurrentUseWhileTheMapChanges(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 6)
	r, err := shardmgr.Open(ctx(t), cfg, shardmgr.WithRefreshInterval(0))
	require.NoError(t, err)
	defer r.Close()
	catalog := pool(t, cfg.Catalog)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := r.Tx(context.Background(), (g+i)%6, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					var id int64
					return tx.QueryRow(ctx, "SELECT "+s.NextID()).Scan(&id)
				})
				if err != nil && !errors.Is(err, shardmgr.ErrShardReadOnly) {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 20 {
		state := shardmgr.StateReadOnly
		if i%2 == 1 {
			state = shardmgr.StateActive
		}
		_, err := shcatalog.SetShardState(ctx(t), catalog, i%6, state, 0)
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	_, _, err = r.Pool(ctx(t), 0) // routes after a refresh
	require.NoError(t, err)
	require.EqualValues(t, 21, r.Generation(), "the router follows the catalog")
}

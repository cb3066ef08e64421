package shardmgr_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
	shcatalog "github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// postsCluster is an initialised cluster of n shards, each holding a posts
// table with the shard's generator as the id DEFAULT, and a router on it.
func postsCluster(t *testing.T, n int, opts ...shardmgr.RouterOption) (*shardmgr.Config, *shardmgr.Router) {
	t.Helper()
	cfg := initCluster(t, n)
	r := openRouter(t, cfg, opts...)
	for id := range n {
		require.NoError(t, r.Tx(ctx(t), id, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			_, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY DEFAULT %s, user_id bigint NOT NULL, body text)",
				s.Table("posts"), s.NextID()))
			return err
		}))
	}
	return cfg, r
}

func TestRouterTxForID(t *testing.T) {
	t.Parallel()
	cfg, r := postsCluster(t, 8, shardmgr.WithRefreshInterval(0))

	for _, key := range []int64{3, 12, 1 << 40} {
		shard := r.ShardForKey(key)
		var id idgen.ID
		require.NoError(t, r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			return tx.QueryRow(ctx, "INSERT INTO "+s.Table("posts")+" (user_id) VALUES ($1) RETURNING id", key).Scan(&id)
		}))

		// One step from the id to its shard's transaction.
		require.NoError(t, r.TxForID(ctx(t), id, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			require.Equal(t, shard, s.ID)
			_, err := tx.Exec(ctx, "UPDATE "+s.Table("posts")+" SET body = 'edited' WHERE id = $1", id)
			return err
		}))
		var body string
		require.NoError(t, r.ReadTxForID(ctx(t), id, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			require.Equal(t, shard, s.ID)
			require.Equal(t, r.Map().Shards[shard].Host, s.Host)
			return tx.QueryRow(ctx, "SELECT body FROM "+s.Table("posts")+" WHERE id = $1", id).Scan(&body)
		}))
		require.Equal(t, "edited", body)
	}

	// Ids that name no shard of the cluster run nothing.
	called := false
	fn := func(context.Context, pgx.Tx, shardmgr.Shard) error { called = true; return nil }
	for _, id := range []idgen.ID{idgen.ID(9) << 10, idgen.ID(8191) << 10, -5} {
		require.ErrorIs(t, r.TxForID(ctx(t), id, fn), shardmgr.ErrUnknownShard, "id %d", id)
		require.ErrorIs(t, r.ReadTxForID(ctx(t), id, fn), shardmgr.ErrUnknownShard, "id %d", id)
	}
	require.False(t, called)

	// TxForID refuses what Tx refuses; ReadTxForID reads in every state.
	id := idgen.ID(5) << 10 // shard 5, time 0, sequence 0
	_, err := shcatalog.SetShardState(ctx(t), pool(t, cfg.Catalog), 5, shardmgr.StateReadOnly, 0)
	require.NoError(t, err)
	err = r.TxForID(ctx(t), id, fn)
	require.ErrorIs(t, err, shardmgr.ErrShardReadOnly)
	var se *shardmgr.ShardError
	require.True(t, errors.As(err, &se))
	require.Equal(t, 5, se.Shard)
	require.False(t, called)
	require.NoError(t, r.ReadTxForID(ctx(t), id, fn))
	require.True(t, called)
}

func TestRouterEachShard(t *testing.T) {
	t.Parallel()
	cfg, r := postsCluster(t, 8, shardmgr.WithRefreshInterval(0))
	for shard := range 8 { // shard i holds i posts
		require.NoError(t, r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+s.Table("posts")+" (user_id) SELECT g FROM generate_series(1, $1) g", shard)
			return err
		}))
	}
	// A moving shard is still read.
	_, err := shcatalog.SetShardState(ctx(t), pool(t, cfg.Catalog), 6, shardmgr.StateMoving, 0)
	require.NoError(t, err)

	var (
		mu       sync.Mutex
		seen     = map[int]int{}
		total    int64
		inFlight atomic.Int32
		maxSeen  atomic.Int32
	)
	require.NoError(t, r.EachShard(ctx(t), 3, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxSeen.Load()
			if now <= m || maxSeen.CompareAndSwap(m, now) {
				break
			}
		}
		time.Sleep(200 * time.Millisecond) // long enough for the others to start, even on a busy machine
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+s.Table("posts")).Scan(&n); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		seen[s.ID]++
		total += n
		return nil
	}))
	require.Len(t, seen, 8)
	for id, n := range seen {
		require.Equal(t, 1, n, "shard %d seen once", id)
	}
	require.EqualValues(t, 0+1+2+3+4+5+6+7, total)
	require.LessOrEqual(t, maxSeen.Load(), int32(3), "at most concurrency calls at once")
	require.GreaterOrEqual(t, maxSeen.Load(), int32(2), "calls ran side by side")

	// Read-only transactions: a write fails on every shard, each reported.
	err = r.EachShard(ctx(t), 4, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+s.Table("posts")+" (user_id) VALUES (1)")
		return err
	})
	var all *shardmgr.ShardErrors
	require.True(t, errors.As(err, &all), "%v", err)
	require.Equal(t, "each shard", all.Op)
	require.Equal(t, 8, all.Total)
	require.Len(t, all.Errs, 8)
	for i, e := range all.Errs {
		var se *shardmgr.ShardError
		require.True(t, errors.As(e, &se))
		require.Equal(t, i, se.Shard, "errors in shard order")
		require.Equal(t, r.Map().Shards[i].Host, se.Host)
	}

	// Failures on some shards: the others run, the failures are aggregated.
	errBoom := errors.New("boom")
	var calls atomic.Int32
	err = r.EachShard(ctx(t), 2, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		calls.Add(1)
		if s.ID == 2 || s.ID == 5 {
			return errBoom
		}
		return nil
	})
	require.EqualValues(t, 8, calls.Load())
	require.ErrorIs(t, err, errBoom)
	require.True(t, errors.As(err, &all))
	require.Len(t, all.Errs, 2)
	require.ErrorContains(t, err, "each shard: 2 of 8 shards failed; shard 2 on pg1: boom; shard 5 on pg2: boom")

	// Bad concurrency: an error, nothing run.
	calls.Store(0)
	for _, c := range []int{0, -1} {
		err = r.EachShard(ctx(t), c, func(context.Context, pgx.Tx, shardmgr.Shard) error { calls.Add(1); return nil })
		require.ErrorContains(t, err, "concurrency")
	}
	require.Zero(t, calls.Load())
}

func TestRouterEachShardStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	_, r := postsCluster(t, 8)
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	var calls []int
	err := r.EachShard(c, 1, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		calls = append(calls, s.ID) // concurrency 1: one call at a time
		if s.ID == 2 {
			cancel()
		}
		return nil
	})
	require.Equal(t, []int{0, 1, 2}, calls, "no shard starts after the cancel")
	require.ErrorIs(t, err, context.Canceled)
	var all *shardmgr.ShardErrors
	require.True(t, errors.As(err, &all))
	var notStarted []int
	for _, e := range all.Errs {
		var se *shardmgr.ShardError
		require.True(t, errors.As(e, &se))
		require.ErrorIs(t, se, context.Canceled)
		if se.Shard > 2 {
			require.ErrorContains(t, se, "not started", "no connection taken for shard %d", se.Shard)
			notStarted = append(notStarted, se.Shard)
		}
	}
	require.Equal(t, []int{3, 4, 5, 6, 7}, notStarted, "every shard not seen is reported")
}

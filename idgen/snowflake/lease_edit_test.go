package snowflake_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// A worker last used by a process whose clock ran an hour ahead does not
// stall the next process: it gets another worker and issues at once.
func TestLeaseHolderWithClockAheadDoesNotBlockTheNext(t *testing.T) {
	dsn := leaseDB(t)
	pool := pgtest.Pool(t, dsn)
	ctx := context.Background()
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	opts := []snowflake.LeaseOption{snowflake.WithTTL(2 * time.Second), snowflake.WithHeartbeat(500 * time.Millisecond)}
	a, err := snowflake.Start(ctx, pool, snowflake.Settings{Now: ahead, MaxBackstep: -1}, opts...)
	require.NoError(t, err)
	require.Equal(t, int64(0), lease(t, a).Worker)
	aLast := next(t, a)
	require.NoError(t, a.Close(ctx)) // worker 0 is free, used an hour ahead

	for range 3 { // restarts in a row
		b, err := snowflake.Start(ctx, pool, snowflake.Settings{MaxBackstep: -1}, opts...)
		require.NoError(t, err)
		id, err := b.NextID()
		require.NoError(t, err, "worker %d", lease(t, b).Worker)
		require.NotEqual(t, int64(0), lease(t, b).Worker, "worker 0 was used an hour ahead of this clock")
		p, _ := b.Layout().Decompose(id)
		pa, _ := a.Layout().Decompose(aLast)
		require.NotEqual(t, pa.Worker, p.Worker)
		require.NoError(t, b.Close(ctx))
	}
}

// A holder that loses its lease (another token in its row) takes a new one
// by itself and issues again, after everything it issued before.
func TestLeaseLostIsTakenAgain(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	ctx := context.Background()
	g := start(t, pool, snowflake.Settings{}, snowflake.WithTTL(time.Second), snowflake.WithHeartbeat(100*time.Millisecond))
	l := lease(t, g)
	last := next(t, g)
	_, err := pool.Exec(ctx, "UPDATE shardid.snowflake_leases SET token = nextval('shardid.snowflake_lease_tokens') WHERE worker = $1", l.Worker)
	require.NoError(t, err)
	sawLoss := false
	require.Eventually(t, func() bool {
		id, err := g.NextID()
		if err != nil {
			sawLoss = true
			return false
		}
		require.Greater(t, id, last)
		last = id
		return sawLoss
	}, time.Minute, 5*time.Millisecond, "the generator never stopped, or never came back")
	nl := lease(t, g)
	require.Greater(t, nl.Token, l.Token)
	require.NotEqual(t, l.Worker, nl.Worker, "the old worker is someone else's now")
}

// An operator deletes a live holder's row: the next process that takes
// that worker starts after every id the old holder could still issue,
// and the old holder stops at its next renewal. No id repeats.
func TestLeaseRowDeletedByHandMakesNoDuplicate(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	ctx := context.Background()
	const ttl = 2 * time.Second
	two := snowflake.Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 1, SeqBits: 16} // workers 0 and 1
	opts := []snowflake.LeaseOption{snowflake.WithTTL(ttl), snowflake.WithHeartbeat(600 * time.Millisecond)}
	a := start(t, pool, snowflake.Settings{Layout: two}, append(opts, snowflake.WithHolder("a"))...)
	start(t, pool, snowflake.Settings{Layout: two}, append(opts, snowflake.WithHolder("c"))...) // holds worker 1
	require.Equal(t, int64(0), lease(t, a).Worker)

	var mu sync.Mutex
	seen := map[int64]string{}
	dups := 0
	collect := func(name string, g *snowflake.Generator, stop <-chan struct{}, wg *sync.WaitGroup) {
		defer wg.Done()
		buf := make([]int64, 64)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := g.NextIDs(buf)
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			mu.Lock()
			for _, id := range buf[:n] {
				if _, ok := seen[id]; ok {
					dups++
				}
				seen[id] = name
			}
			mu.Unlock()
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go collect("a", a, stop, &wg)
	time.Sleep(300 * time.Millisecond)
	_, err := pool.Exec(ctx, "DELETE FROM shardid.snowflake_leases WHERE holder = 'a'")
	require.NoError(t, err)
	b, err := snowflake.Start(ctx, pool, snowflake.Settings{Layout: two}, append(opts, snowflake.WithHolder("b"))...)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close(ctx) })
	require.Equal(t, int64(0), lease(t, b).Worker, "the only worker without a live row")
	wg.Add(1)
	go collect("b", b, stop, &wg)
	time.Sleep(3 * ttl)
	close(stop)
	wg.Wait()
	byName := map[string]int{}
	for _, n := range seen {
		byName[n]++
	}
	t.Logf("ids: %v, duplicates: %d", byName, dups)
	require.Positive(t, byName["a"])
	require.Positive(t, byName["b"], "b issued")
	require.Zero(t, dups)
}

// When every free worker was used ahead of this clock, Start takes none
// beyond its bound and says when the nearest frees; within the bound it
// takes it and Ready says the generator cannot issue yet.
func TestLeaseEveryWorkerAheadIsReported(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	ctx := context.Background()
	two := snowflake.Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 1, SeqBits: 16}
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	opts := []snowflake.LeaseOption{snowflake.WithTTL(2 * time.Second), snowflake.WithHeartbeat(500 * time.Millisecond)}
	var held []*snowflake.Generator
	for range 2 {
		g, err := snowflake.Start(ctx, pool, snowflake.Settings{Layout: two, Now: ahead}, opts...)
		require.NoError(t, err)
		next(t, g)
		held = append(held, g)
	}
	_, err := snowflake.Start(ctx, pool, snowflake.Settings{Layout: two}, opts...)
	require.ErrorIs(t, err, snowflake.ErrNoFreeWorker, "both leased")
	// Release both: free, but used an hour ahead.
	for _, g := range held {
		require.NoError(t, g.Close(ctx))
	}
	_, err = snowflake.Start(ctx, pool, snowflake.Settings{Layout: two}, opts...)
	require.ErrorIs(t, err, snowflake.ErrNoFreeWorker)
	require.ErrorContains(t, err, "ahead of this clock")

	g, err := snowflake.Start(ctx, pool, snowflake.Settings{Layout: two}, append(opts, snowflake.WithMaxWait(2*time.Hour))...)
	require.NoError(t, err)
	defer g.Close(ctx)
	require.ErrorIs(t, g.Ready(), snowflake.ErrLeaseNotYetUsable)
	_, err = g.NextID()
	require.ErrorIs(t, err, snowflake.ErrLeaseNotYetUsable)
}

// An UPDATE by hand cannot lower what the next holder starts after, and
// the marks cannot be deleted or truncated.
func TestLeaseTableEditsKeepPromises(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	ctx := context.Background()
	g := start(t, pool, snowflake.Settings{}, snowflake.WithTTL(time.Minute))
	l := lease(t, g)
	next(t, g)
	var before, after int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT used_until_ms FROM shardid.snowflake_leases WHERE worker = $1", l.Worker).Scan(&before))
	_, err := pool.Exec(ctx, "UPDATE shardid.snowflake_leases SET used_until_ms = 0 WHERE worker = $1", l.Worker)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, "SELECT used_until_ms FROM shardid.snowflake_leases WHERE worker = $1", l.Worker).Scan(&after))
	require.Equal(t, before, after)
	_, err = pool.Exec(ctx, "UPDATE shardid.snowflake_lease_marks SET used_until_ms = 0, max_worker = -1")
	require.NoError(t, err)
	var maxWorker int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT max_worker, used_until_ms FROM shardid.snowflake_lease_marks").Scan(&maxWorker, &after))
	require.Equal(t, l.Worker, maxWorker)
	require.GreaterOrEqual(t, after, before)
	_, err = pool.Exec(ctx, "DELETE FROM shardid.snowflake_lease_marks")
	require.ErrorContains(t, err, "must not be deleted")
	_, err = pool.Exec(ctx, "TRUNCATE shardid.snowflake_lease_marks")
	require.ErrorContains(t, err, "must not be deleted")
	// The holder's own release still records the last time it used.
	require.NoError(t, g.Close(ctx))
	require.NoError(t, pool.QueryRow(ctx, "SELECT used_until_ms FROM shardid.snowflake_leases WHERE worker = $1", l.Worker).Scan(&after))
	require.Less(t, after, before, "a minute's promise given back")
}

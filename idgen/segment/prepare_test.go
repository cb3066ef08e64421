package segment_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
)

// Preparing a source (creating its database, migrating it) is bounded by
// the prepare timeout, not by the short call timeout: a preparation that
// takes longer than a call succeeds at its first attempt, at start-up, and
// the allocator is not ready until it has.
func TestPrepareIsBoundedGenerouslyAndRunsAtStartUp(t *testing.T) {
	f := newFixture(t, 1)
	var attempts atomic.Int32
	release := make(chan struct{})
	slow := func(ctx context.Context, i int) error {
		attempts.Add(1)
		select {
		case <-release: // as long as CREATE DATABASE takes on a busy server
		case <-ctx.Done():
			return ctx.Err()
		}
		return f.prepare(ctx, i)
	}
	a, err := segment.New(f.pools, map[string]segment.TagConfig{"order": {}}, segment.WithLogger(quietLogger()),
		segment.WithPrepare(slow), segment.WithCallTimeout(300*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	require.Eventually(t, func() bool { return attempts.Load() == 1 }, time.Minute, time.Millisecond, "prepared at start-up, before any call")
	time.Sleep(time.Second) // over three call timeouts
	require.ErrorIs(t, a.Ready(), segment.ErrNotReady)
	require.Contains(t, a.Ready().Error(), "preparing")
	require.Equal(t, "preparing", a.Health()[0].State)
	close(release)
	require.Eventually(t, func() bool { return a.Ready() == nil }, time.Minute, 5*time.Millisecond)
	require.EqualValues(t, 1, attempts.Load(), "the first attempt was not cut short")
	id, err := a.Next(ctxT(t), "order")
	require.NoError(t, err)
	require.Positive(t, id)

	// A preparation that outlives its own bound is retried, and said so.
	var tries atomic.Int32
	b, err := segment.New(f.pools, map[string]segment.TagConfig{"order": {}}, segment.WithLogger(quietLogger()),
		segment.WithPrepare(func(ctx context.Context, i int) error { tries.Add(1); <-ctx.Done(); return ctx.Err() }),
		segment.WithPrepareTimeout(200*time.Millisecond), segment.WithBreaker(3, 100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(b.Close)
	require.Eventually(t, func() bool { return tries.Load() >= 3 }, time.Minute, time.Millisecond)
	require.ErrorContains(t, b.Ready(), "deadline exceeded")
	_, err = b.Next(ctxT(t), "order")
	require.ErrorIs(t, err, segment.ErrUnavailable)
}

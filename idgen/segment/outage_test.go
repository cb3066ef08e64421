package segment_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// transitions records the breaker states one source went through.
type transitions struct {
	mu     sync.Mutex
	states []segment.BreakerState
}

func (r *transitions) hook(source int) func(int, segment.BreakerState) {
	return func(i int, s segment.BreakerState) {
		if i == source {
			r.mu.Lock()
			r.states = append(r.states, s)
			r.mu.Unlock()
		}
	}
}

func (r *transitions) seen(s segment.BreakerState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.states {
		if x == s {
			return true
		}
	}
	return false
}

// consumer takes ids without pause until stopped.
type consumer struct {
	stop   atomic.Bool
	done   chan struct{}
	ids    []int64
	errs   []error
	served atomic.Int64
}

func consume(ctx context.Context, tag *segment.Tag) *consumer {
	c := &consumer{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for !c.stop.Load() {
			id, err := tag.Next(ctx)
			if err != nil {
				c.errs = append(c.errs, err)
				return
			}
			c.ids = append(c.ids, id)
			c.served.Add(1)
		}
	}()
	return c
}

func (c *consumer) finish() {
	c.stop.Store(true)
	<-c.done
}

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	t.Parallel()
	own := pgtest.Own(t, localpg.Options{})
	f := fixtureOn(t, own, pgtest.Servers(t, 1)[0])
	var rec transitions
	a := f.open(t, map[string]segment.TagConfig{"order": {MinStep: 20, MaxStep: 20}},
		segment.WithBreaker(2, 50*time.Millisecond), segment.WithBreakerHook(rec.hook(0)))
	ctx := ctxT(t)
	c := consume(ctx, a.Tag("order"))
	defer c.finish()
	loads := func(i int) uint64 { return a.Health()[i].Loads }
	require.Eventually(t, func() bool { return loads(0) > 2 && loads(1) > 2 }, 20*time.Second, time.Millisecond)

	require.NoError(t, own.Halt())
	require.Eventually(t, func() bool { return rec.seen(segment.Open) }, 20*time.Second, time.Millisecond, "repeated failures open the breaker")
	require.Eventually(t, func() bool { return rec.seen(segment.HalfOpen) }, 20*time.Second, time.Millisecond, "open breaker probes in the background")
	require.NotEqual(t, "closed", a.Health()[0].State)
	require.NotEmpty(t, a.Health()[0].LastError)
	before := loads(1)
	require.Eventually(t, func() bool { return loads(1) > before+20 }, 20*time.Second, time.Millisecond, "the other source carries the load")

	require.NoError(t, own.Restart(ctx))
	require.Eventually(t, func() bool { return a.Health()[0].State == "closed" }, 20*time.Second, time.Millisecond, "a probe closes the breaker")
	back := loads(0)
	require.Eventually(t, func() bool { return loads(0) > back+2 }, 20*time.Second, time.Millisecond, "the source serves again")

	c.finish()
	require.Empty(t, c.errs, "no caller saw the outage")
	requireUnique(t, c.ids)
	require.Equal(t, uint64(1), a.Health()[0].Trips)
}

func TestAllSourcesDown(t *testing.T) {
	t.Parallel()
	own := pgtest.Own(t, localpg.Options{})
	f := fixtureOn(t, own)
	a := f.open(t, map[string]segment.TagConfig{"order": {MinStep: 100, MaxStep: 100}},
		segment.WithBreaker(1, 50*time.Millisecond))
	tag := a.Tag("order")
	ctx := ctxT(t)
	var ids []int64
	for range 10 {
		id, err := tag.Next(ctx)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.NoError(t, own.Halt())

	// The 90 ids left in memory are still handed out, then a typed error.
	var err error
	for {
		var id int64
		id, err = tag.Next(ctx)
		if err != nil {
			break
		}
		ids = append(ids, id)
	}
	require.ErrorIs(t, err, segment.ErrUnavailable)
	require.Len(t, ids, 100)
	start := time.Now()
	_, err = tag.Next(ctx)
	require.ErrorIs(t, err, segment.ErrUnavailable)
	require.Less(t, time.Since(start), time.Second, "an open breaker answers at once")
	n, err := tag.Fill(ctx, make([]int64, 10))
	require.ErrorIs(t, err, segment.ErrUnavailable)
	require.Zero(t, n)

	require.NoError(t, own.Restart(ctx))
	require.Eventually(t, func() bool {
		id, err := tag.Next(ctx)
		if err == nil {
			ids = append(ids, id)
		}
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "the tag serves again once the source is back")
	requireUnique(t, ids)
	require.Greater(t, ids[len(ids)-1], ids[99])
}

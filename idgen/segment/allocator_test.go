package segment_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
)

func TestConcurrentIDsAreUnique(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	a := f.open(t, map[string]segment.TagConfig{"order": {MinStep: 500, MaxStep: 20_000}})
	tag := a.Tag("order")
	ctx := ctxT(t)

	const workers, perWorker = 16, 125_000 // two million ids
	results := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ids := make([]int64, 0, perWorker)
			batch := make([]int64, 37)
			for len(ids) < perWorker {
				if w%2 == 0 { // half the workers take one id at a time
					id, err := tag.Next(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					ids = append(ids, id)
					continue
				}
				n, err := tag.Fill(ctx, batch[:min(len(batch), perWorker-len(ids))])
				if err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, batch[:n]...)
			}
			results[w] = ids
		})
	}
	wg.Wait()
	var all []int64
	for _, ids := range results {
		require.Len(t, ids, perWorker)
		all = append(all, ids...)
	}
	requireUnique(t, all)
	for i := range 3 {
		require.Positive(t, f.maxID(t, i, "order"), "every source served")
	}
}

func TestModuloRuleWithoutGaps(t *testing.T) {
	t.Parallel()
	const n = 3
	f := newFixture(t, n)
	a := f.open(t, map[string]segment.TagConfig{"pay": {MinStep: 10, MaxStep: 40}})
	tag := a.Tag("pay")
	ids := make([]int64, 5_000)
	got, err := tag.Fill(ctxT(t), ids)
	require.NoError(t, err)
	require.Equal(t, len(ids), got)
	a.Close()

	// One consumer uses each segment up before the next, and segments of one
	// source are consecutive in its residue class: so what source r handed
	// out is a run of its class without a gap (the first row created starts
	// at r; the others above what that one had reserved).
	byResidue := make([][]int64, n)
	for _, id := range ids {
		byResidue[id%n] = append(byResidue[id%n], id)
	}
	for r, class := range byResidue {
		require.NotEmpty(t, class, "residue %d", r)
		slices.Sort(class)
		for k, id := range class {
			require.Equal(t, class[0]+int64(k*n), id, "residue %d, position %d", r, k)
		}
		max := f.maxID(t, r, "pay")
		require.Equal(t, int64(r), max%n, "the row stays in its residue class")
		require.GreaterOrEqual(t, max, class[len(class)-1])
	}
}

func TestPreloadBeforeExhaustion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	a := f.open(t, map[string]segment.TagConfig{"doc": {MinStep: 100, MaxStep: 100, Preload: 0.2}})
	tag := a.Tag("doc")
	ctx := ctxT(t)

	for range 79 {
		_, err := tag.Next(ctx)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return tag.Stats().Loads == 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, uint64(1), tag.Stats().Loads, "no preload before 80% of the segment is used")
	require.Equal(t, int64(21), tag.Stats().InMemory)

	_, err := tag.Next(ctx) // the 80th id: 20% left
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tag.Stats().Loads == 2 }, 10*time.Second, time.Millisecond,
		"the next segment is loaded in the background")
	require.Equal(t, int64(120), tag.Stats().InMemory, "20 left in the current segment, 100 preloaded")
	require.Equal(t, int64(200), f.maxID(t, 0, "doc"))
}

func TestStepGrowsAndShrinks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	clock := newFakeClock()
	a := f.open(t, map[string]segment.TagConfig{"ledger": {MinStep: 100, MaxStep: 800}}, segment.WithClock(clock.Now))
	tag := a.Tag("ledger")
	ctx := ctxT(t)

	// loadAfter consumes ids until the tag loads another segment, with the
	// clock moved by d since the last load, and returns the new step.
	loadAfter := func(d time.Duration) int64 {
		t.Helper()
		want := tag.Stats().Loads + 1
		clock.Advance(d)
		for tag.Stats().Loads < want {
			_, err := tag.Next(ctx)
			require.NoError(t, err)
		}
		return tag.Stats().Step
	}
	require.Equal(t, int64(100), loadAfter(0), "first segment: min_step")
	steps := []int64{}
	for _, d := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, time.Second, // fast: double to max
		time.Minute, 10 * time.Minute, // keep
		11 * time.Minute, time.Hour, 20 * time.Minute, time.Hour} { // slow: halve to min
		steps = append(steps, loadAfter(d))
	}
	require.Equal(t, []int64{200, 400, 800, 800, 800, 800, 400, 200, 100, 100}, steps)
}

func TestRestartDoesNotReuse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	tags := map[string]segment.TagConfig{"order": {MinStep: 50, MaxStep: 50}}
	var all []int64
	highest := [2]int64{}
	for round := range 3 {
		a := f.open(t, tags)
		ids := make([]int64, 120)
		_, err := a.Tag("order").Fill(ctxT(t), ids)
		require.NoError(t, err)
		a.Close() // the rest of its segments is lost, never handed out again
		lowest := [2]int64{1 << 62, 1 << 62}
		for _, id := range ids {
			lowest[id%2] = min(lowest[id%2], id)
		}
		for r := range 2 {
			require.Greater(t, lowest[r], highest[r], "round %d, source %d starts above what it handed out before", round, r)
		}
		for _, id := range ids {
			highest[id%2] = max(highest[id%2], id)
		}
		all = append(all, ids...)
	}
	requireUnique(t, all)
}

func TestNonConsecutive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	a := f.open(t, map[string]segment.TagConfig{"inv": {MinStep: 1000, MaxSkip: 50}})
	tag := a.Tag("inv")
	ids := make([]int64, 3000)
	_, err := tag.Fill(ctxT(t), ids)
	require.NoError(t, err)
	var skipped int
	for i := 1; i < len(ids); i++ {
		d := ids[i] - ids[i-1]
		require.True(t, d >= 1 && d <= 50, "step %d between %d and %d", d, ids[i-1], ids[i])
		if d > 1 {
			skipped++
		}
	}
	require.Greater(t, skipped, len(ids)/2, "most neighbours are not consecutive")
}

func TestReorderedSourcesAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	tags := map[string]segment.TagConfig{"order": {}}
	a := f.open(t, tags)
	_, err := a.Next(ctxT(t), "order")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.Tag("order").Stats().Loads >= 1 }, 10*time.Second, time.Millisecond)
	// Make sure both rows exist.
	for range 2 {
		ids := make([]int64, 600)
		_, err := a.Tag("order").Fill(ctxT(t), ids)
		require.NoError(t, err)
	}
	a.Close()

	f.dsns[0], f.dsns[1] = f.dsns[1], f.dsns[0]
	f.pools[0], f.pools[1] = f.pools[1], f.pools[0]
	b := f.open(t, tags, segment.WithBreaker(100, time.Hour))
	_, err = b.Next(ctxT(t), "order")
	require.ErrorIs(t, err, segment.ErrUnavailable)
	var le *segment.LayoutError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "order", le.Tag)
	require.Equal(t, 2, le.GotStride)
}

func TestUnknownTagAndClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	a := f.open(t, map[string]segment.TagConfig{"order": {}})
	_, err := a.Next(ctxT(t), "nope")
	require.ErrorIs(t, err, segment.ErrUnknownTag)
	require.Nil(t, a.Tag("nope"))
	require.Equal(t, []string{"order"}, a.Tags())

	_, err = segment.New(nil, map[string]segment.TagConfig{"x": {}})
	require.ErrorIs(t, err, segment.ErrConfig)
	_, err = segment.New(f.pools, map[string]segment.TagConfig{"x": {MinStep: 10, MaxStep: 5}})
	require.ErrorIs(t, err, segment.ErrConfig)

	a.Close()
	// Ids left in memory may still be handed out; once they are gone, Closed.
	for {
		_, err := a.Next(ctxT(t), "order")
		if err != nil {
			require.True(t, errors.Is(err, segment.ErrClosed), "got %v", err)
			break
		}
	}
}

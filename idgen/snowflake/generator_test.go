package snowflake_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/snowflake"
)

// fakeClock is a clock that moves only when told, or when the generator
// sleeps on it.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept []time.Duration
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) settings(s snowflake.Settings) snowflake.Settings {
	s.Now, s.Sleep = c.Now, c.Sleep
	return s
}

var t2026 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func next(t *testing.T, g *snowflake.Generator) int64 {
	t.Helper()
	id, err := g.NextID()
	require.NoError(t, err)
	return id
}

func TestNextIDFieldsAndOrder(t *testing.T) {
	for name, s := range map[string]snowflake.Settings{
		"twitter":   {Datacenter: 3, Worker: 17},
		"sonyflake": {Layout: snowflake.Sonyflake, Worker: 40000},
		"custom":    {Layout: snowflake.Layout{Epoch: 1700000000000, TimeBits: 42, WorkerBits: 8, SeqBits: 13}, Worker: 255},
	} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock(t2026.Add(1234567 * time.Microsecond))
			g, err := snowflake.New(clock.settings(s))
			require.NoError(t, err)
			l := g.Layout()
			var last int64 = -1
			for i := range 3000 {
				if i%500 == 0 {
					clock.Add(7 * time.Millisecond)
				}
				id := next(t, g)
				require.Greater(t, id, last)
				last = id
				p, err := l.Decompose(id)
				require.NoError(t, err)
				require.Equal(t, s.Datacenter, p.Datacenter)
				require.Equal(t, s.Worker, p.Worker)
				now := clock.Now()
				require.False(t, p.Time.After(now), "id time %s after clock %s", p.Time, now)
				require.Less(t, now.Sub(p.Time), l.Unit+1, "id time within the clock's tick")
				back, err := l.Compose(p.Time, p.Datacenter, p.Worker, p.Seq)
				require.NoError(t, err)
				require.Equal(t, id, back)
			}
		})
	}
}

// A tick's sequence used up: the generator waits for the next tick instead
// of wrapping or borrowing from the future.
func TestSequenceExhaustedWaitsForNextTick(t *testing.T) {
	clock := newFakeClock(t2026)
	g, err := snowflake.New(clock.settings(snowflake.Settings{}))
	require.NoError(t, err)
	l := g.Layout()
	first, _ := l.Decompose(next(t, g))
	for range 4095 {
		next(t, g)
	}
	require.Empty(t, clock.slept)
	p, _ := l.Decompose(next(t, g))
	require.Equal(t, first.Ticks+1, p.Ticks)
	require.Zero(t, p.Seq)
	require.Len(t, clock.slept, 1)
	require.Equal(t, time.Millisecond, clock.slept[0])
}

func TestClockStepsBack(t *testing.T) {
	clock := newFakeClock(t2026)
	g, err := snowflake.New(clock.settings(snowflake.Settings{MaxBackstep: 5 * time.Millisecond}))
	require.NoError(t, err)
	last := next(t, g)

	// A small step back is waited out: the next id is later, never equal.
	clock.Add(-3 * time.Millisecond)
	id := next(t, g)
	require.Greater(t, id, last)
	require.Len(t, clock.slept, 1)
	require.LessOrEqual(t, clock.slept[0], 5*time.Millisecond)
	last = id

	// A large one is refused, as often as asked, and issues nothing.
	clock.Add(-time.Second)
	for range 3 {
		_, err = g.NextID()
		require.ErrorIs(t, err, snowflake.ErrClockMovedBackwards)
	}
	// Once the clock is back, ids go on from where they were.
	clock.Add(time.Second)
	require.Greater(t, next(t, g), last)

	// Negative MaxBackstep: no step back is waited out.
	clock2 := newFakeClock(t2026)
	g2, err := snowflake.New(clock2.settings(snowflake.Settings{MaxBackstep: -1}))
	require.NoError(t, err)
	next(t, g2)
	clock2.Add(-2 * time.Millisecond)
	_, err = g2.NextID()
	require.ErrorIs(t, err, snowflake.ErrClockMovedBackwards)
}

func TestTimeOutsideTheLayout(t *testing.T) {
	for name, at := range map[string]time.Time{
		"before epoch": time.UnixMilli(snowflake.TwitterEpoch - 1),
		"after end":    time.UnixMilli(snowflake.TwitterEpoch + 1<<41),
	} {
		clock := newFakeClock(at)
		g, err := snowflake.New(clock.settings(snowflake.Settings{}))
		require.NoError(t, err)
		_, err = g.NextID()
		require.ErrorIs(t, err, snowflake.ErrOverTimeLimit, name)
	}
}

func TestConcurrentIDsUnique(t *testing.T) {
	g, err := snowflake.New(snowflake.Settings{Worker: 1})
	require.NoError(t, err)
	const workers, each = 4, 50000
	out := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ids := make([]int64, each)
			for i := range ids {
				id, err := g.NextID()
				if err != nil {
					panic(err)
				}
				ids[i] = id
			}
			out[w] = ids
		})
	}
	wg.Wait()
	seen := make(map[int64]bool, workers*each)
	for _, ids := range out {
		for i, id := range ids {
			require.False(t, seen[id], "duplicate %d", id)
			seen[id] = true
			if i > 0 {
				require.Greater(t, id, ids[i-1], "ids of one goroutine increase")
			}
		}
	}
}

func TestBadSettings(t *testing.T) {
	for name, tc := range map[string]struct {
		s   snowflake.Settings
		err error
	}{
		"widths":          {snowflake.Settings{Layout: snowflake.Layout{TimeBits: 41, WorkerBits: 10, SeqBits: 10}}, snowflake.ErrInvalidLayout},
		"no seq":          {snowflake.Settings{Layout: snowflake.Layout{TimeBits: 43, WorkerBits: 20}}, snowflake.ErrInvalidLayout},
		"unit":            {snowflake.Settings{Layout: snowflake.Layout{Unit: 1500 * time.Microsecond}}, snowflake.ErrInvalidLayout},
		"negative epoch":  {snowflake.Settings{Layout: snowflake.Layout{Epoch: -1}}, snowflake.ErrInvalidLayout},
		"worker":          {snowflake.Settings{Worker: 32}, snowflake.ErrInvalidSettings},
		"datacenter":      {snowflake.Settings{Datacenter: -1}, snowflake.ErrInvalidSettings},
		"sonyflake no dc": {snowflake.Settings{Layout: snowflake.Sonyflake, Datacenter: 1}, snowflake.ErrInvalidSettings},
	} {
		_, err := snowflake.New(tc.s)
		require.ErrorIs(t, err, tc.err, name)
	}
}

func TestComposeRefusesOutOfRange(t *testing.T) {
	l := snowflake.Twitter
	for name, f := range map[string]func() error{
		"worker": func() error { _, err := l.Compose(t2026, 0, 32, 0); return err },
		"dc":     func() error { _, err := l.Compose(t2026, 32, 0, 0); return err },
		"seq":    func() error { _, err := l.Compose(t2026, 0, 0, 4096); return err },
		"time":   func() error { _, err := l.Compose(time.UnixMilli(0), 0, 0, 0); return err },
	} {
		require.ErrorIs(t, f(), snowflake.ErrInvalidID, name)
	}
	_, err := l.Decompose(-1)
	require.True(t, errors.Is(err, snowflake.ErrInvalidID))
}

func FuzzComposeDecompose(f *testing.F) {
	f.Add(int64(175928847299117063), false)
	f.Add(int64(1050118621198921728), true)
	f.Fuzz(func(t *testing.T, id int64, sony bool) {
		l := snowflake.Twitter
		if sony {
			l = snowflake.Sonyflake
		}
		p, err := l.Decompose(id)
		if id < 0 {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		back, err := l.Compose(p.Time, p.Datacenter, p.Worker, p.Seq)
		require.NoError(t, err)
		require.Equal(t, id, back)
	})
}

func TestNextIDsBatchWithinOneTick(t *testing.T) {
	clock := newFakeClock(t2026)
	g, err := snowflake.New(clock.settings(snowflake.Settings{Worker: 4}))
	require.NoError(t, err)
	l := g.Layout()
	buf := make([]int64, 1000)
	var last int64 = -1
	total := 0
	for total < 10000 {
		n, err := g.NextIDs(buf)
		require.NoError(t, err)
		require.Positive(t, n)
		first, _ := l.Decompose(buf[0])
		for i, id := range buf[:n] {
			require.Greater(t, id, last)
			last = id
			p, _ := l.Decompose(id)
			require.Equal(t, first.Ticks, p.Ticks, "one tick per batch")
			require.Equal(t, first.Seq+int64(i), p.Seq)
			require.Equal(t, int64(4), p.Worker)
		}
		total += n
	}
	n, err := g.NextIDs(nil)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestCoarseNow(t *testing.T) {
	g, err := snowflake.New(snowflake.Settings{Now: snowflake.CoarseNow})
	require.NoError(t, err)
	var last int64
	for range 20000 {
		id := next(t, g)
		require.Greater(t, id, last)
		last = id
	}
	p, err := g.Layout().Decompose(last)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), p.Time, 100*time.Millisecond)
	a := snowflake.CoarseNow()
	require.Eventually(t, func() bool { return snowflake.CoarseNow().After(a) }, time.Second, time.Millisecond, "it moves")
}

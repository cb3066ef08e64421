package snowflake

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// DefaultMaxBackstep is how far back the clock may step before NextID
// refuses instead of waiting.
const DefaultMaxBackstep = 5 * time.Millisecond

// Settings configure a Generator. Zero values mean the documented defaults.
type Settings struct {
	// Layout is the id layout; the zero value is Twitter.
	Layout Layout
	// Datacenter is the datacenter field, 0..Layout.MaxDatacenter().
	Datacenter int64
	// Worker is the worker field, 0..Layout.MaxWorker(), for New. Start
	// ignores it: the lease picks the worker.
	Worker int64
	// MaxBackstep is the largest step back of the clock that NextID waits
	// out; a larger one makes it return ErrClockMovedBackwards. 0 means
	// DefaultMaxBackstep; negative means never wait for a step back (the
	// wait for the next tick when a tick's sequence is used up is always
	// done).
	MaxBackstep time.Duration
	// Now is the clock; nil means time.Now. Deadlines are measured on the
	// differences of its readings, which for time.Now are monotonic.
	Now func() time.Time
	// Sleep waits; nil means a spin for waits under a millisecond and
	// time.Sleep otherwise. A test clock advances itself here.
	Sleep func(time.Duration)
}

// Generator issues snowflake ids for one node (datacenter and worker). It
// is safe for concurrent use; NextID takes no lock.
type Generator struct {
	l       Layout
	node    int64
	maxBack time.Duration
	now     func() time.Time
	sleep   func(time.Duration)
	base    time.Time // deadlines are durations since this reading

	// state is the last (tick << SeqBits | seq) handed out; ids are
	// derived from it, so a CAS that moves it up is what makes an id
	// unique. It has a cache line to itself: every CAS would otherwise
	// evict the read-mostly fields below from the other cores.
	_     [64]byte
	state atomic.Int64
	_     [56]byte
	// deadline is how long after base ids may be issued (the lease's
	// local deadline); ceiling is the highest tick an id may carry (what
	// the lease row promises). Both only grow while the lease holds.
	deadline atomic.Int64
	ceiling  atomic.Int64
	stopErr  atomic.Pointer[error]
	lastTick atomic.Int64 // set when sealed

	lease *leaseKeeper // nil for New
}

// sealed is the state of a generator that issues nothing more: no CAS from
// an older state can succeed after it.
const sealed = math.MaxInt64

// New returns a generator for the fixed node s.Datacenter, s.Worker. The
// caller guarantees that no other generator uses that node with the same
// layout; Start leases a worker instead.
func New(s Settings) (*Generator, error) {
	g, err := newGenerator(s)
	if err != nil {
		return nil, err
	}
	if s.Worker < 0 || s.Worker > g.l.MaxWorker() {
		return nil, fmt.Errorf("%w: worker %d not in 0..%d", ErrInvalidSettings, s.Worker, g.l.MaxWorker())
	}
	g.node = s.Datacenter<<g.l.WorkerBits | s.Worker
	g.deadline.Store(math.MaxInt64)
	g.ceiling.Store(g.l.maxTicks())
	return g, nil
}

func newGenerator(s Settings) (*Generator, error) {
	l, err := s.Layout.check()
	if err != nil {
		return nil, err
	}
	if s.Datacenter < 0 || s.Datacenter > l.MaxDatacenter() {
		return nil, fmt.Errorf("%w: datacenter %d not in 0..%d", ErrInvalidSettings, s.Datacenter, l.MaxDatacenter())
	}
	g := &Generator{l: l, maxBack: s.MaxBackstep, now: s.Now, sleep: s.Sleep}
	if g.maxBack == 0 {
		g.maxBack = DefaultMaxBackstep
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.sleep == nil {
		g.sleep = wait
	}
	g.base = g.now()
	g.state.Store(-1) // the first id may be tick 0, seq 0
	return g, nil
}

// wait spins for short waits: time.Sleep rounds a wait for the next
// millisecond up to the timer's granularity, which would cap the rate.
func wait(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.Gosched()
	}
}

// Layout returns the generator's layout with its defaults resolved.
func (g *Generator) Layout() Layout { return g.l }

// Datacenter and Worker are the generator's node.
func (g *Generator) Datacenter() int64 { return g.node >> g.l.WorkerBits }
func (g *Generator) Worker() int64     { return g.node & (1<<g.l.WorkerBits - 1) }

// NextID returns the next id. Ids from one generator strictly increase.
// When a tick's sequence is used up it waits for the next tick; when the
// clock is behind the last id it waits up to Settings.MaxBackstep and
// otherwise returns ErrClockMovedBackwards. A leased generator returns
// ErrLeaseExpired, ErrLeaseLost or ErrClosed once it may not issue.
func (g *Generator) NextID() (int64, error) {
	first, _, err := g.reserve(1)
	if err != nil {
		return 0, err
	}
	return g.l.compose(first>>g.l.SeqBits, g.node, first&g.l.seqMask()), nil
}

// NextIDs fills dst with consecutive ids of one tick from a single clock
// reading and a single atomic step, and returns how many it wrote: at
// least one and at most len(dst) and what is left of the tick's sequence.
// It is NextID for callers that want many ids at once (an HTTP batch):
// the clock read, not the atomic step, is most of an id's cost.
func (g *Generator) NextIDs(dst []int64) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	first, n, err := g.reserve(int64(len(dst)))
	if err != nil {
		return 0, err
	}
	tick, seq := first>>g.l.SeqBits, first&g.l.seqMask()
	for i := range n {
		dst[i] = g.l.compose(tick, g.node, seq+int64(i))
	}
	return int(n), nil
}

// reserve moves the state up by up to want values of one tick and returns
// the first of them (tick << SeqBits | seq) and how many it took.
func (g *Generator) reserve(want int64) (first, n int64, err error) {
	l := &g.l
	for {
		// The state is read before the clock: the tick in it then comes
		// from an earlier reading than ours, so a goroutine delayed
		// between the two reads cannot mistake others' progress for the
		// clock stepping back.
		old := g.state.Load()
		now := g.now()
		if old == sealed || now.Sub(g.base) > time.Duration(g.deadline.Load()) {
			return 0, 0, g.stopped()
		}
		tick := l.tickOf(now.UnixMilli())
		if tick < 0 {
			return 0, 0, fmt.Errorf("%w: %s is before the epoch", ErrOverTimeLimit, now.UTC().Format(time.RFC3339Nano))
		}
		next := tick << l.SeqBits
		if next <= old {
			next = old + 1
		}
		if nt := next >> l.SeqBits; nt > tick {
			// The sequence of the last tick is used up, or the clock is
			// behind the last id: wait for the clock to reach nt.
			d := time.Duration(l.tickStart(nt)*int64(time.Millisecond) - now.UnixNano())
			if nt-tick > 1 && d > g.maxBack {
				return 0, 0, fmt.Errorf("%w: %s behind the last id (waits out up to %s)", ErrClockMovedBackwards, d, max(g.maxBack, 0))
			}
			g.sleep(d)
			continue
		}
		if tick > g.ceiling.Load() {
			if tick > l.maxTicks() {
				return 0, 0, fmt.Errorf("%w: %s is past the layout's last time", ErrOverTimeLimit, now.UTC().Format(time.RFC3339Nano))
			}
			// The clock ran past what the lease row promises: issuing
			// now could overlap the next holder of this worker.
			return 0, 0, fmt.Errorf("%w: clock past the time the lease covers", ErrLeaseExpired)
		}
		n = min(want, l.seqMask()-next&l.seqMask()+1)
		if g.state.CompareAndSwap(old, next+n-1) {
			return next, n, nil
		}
	}
}

func (g *Generator) stopped() error {
	if p := g.stopErr.Load(); p != nil {
		return *p
	}
	return ErrLeaseExpired
}

// extend moves the deadline (since base) and the ceiling tick up.
func (g *Generator) extend(deadline time.Duration, ceiling int64) {
	for c := g.ceiling.Load(); ceiling > c && !g.ceiling.CompareAndSwap(c, ceiling); c = g.ceiling.Load() {
	}
	for d := g.deadline.Load(); int64(deadline) > d && !g.deadline.CompareAndSwap(d, int64(deadline)); d = g.deadline.Load() {
	}
}

// stop ends issuing for good with err and returns the last tick handed out
// (-1 if none); no NextID in flight can hand out another after it returns.
func (g *Generator) stop(err error) int64 {
	g.stopErr.CompareAndSwap(nil, &err)
	g.deadline.Store(math.MinInt64)
	for {
		old := g.state.Load()
		if old == sealed {
			return g.lastTick.Load()
		}
		last := int64(-1)
		if old >= 0 {
			last = old >> g.l.SeqBits
		}
		g.lastTick.Store(last)
		if g.state.CompareAndSwap(old, sealed) {
			return last
		}
	}
}

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
	// Layout is the id layout. Zero means Twitter.
	Layout Layout
	// Datacenter is the datacenter field, 0..Layout.MaxDatacenter().
	Datacenter int64
	// Worker is the worker field, 0..Layout.MaxWorker(), for New. Start
	// ignores it: the lease picks the worker.
	Worker int64
	// MaxBackstep is the largest step back of the clock that NextID waits
	// out; a larger one makes it return ErrClockMovedBackwards. Zero means
	// DefaultMaxBackstep (5ms); negative means never wait for a step back (the
	// wait for the next tick when a tick's sequence is used up is always
	// done).
	MaxBackstep time.Duration
	// Now is the clock. Zero means time.Now. Deadlines are measured on the
	// differences of its readings, which for time.Now are monotonic.
	Now func() time.Time
	// Sleep waits. Zero means a spin for waits under a millisecond and
	// time.Sleep otherwise. A test clock advances itself here.
	Sleep func(time.Duration)
}

// Generator issues snowflake ids for one node (datacenter and worker). It
// is safe for concurrent use; NextID takes no lock.
type Generator struct {
	l       Layout
	node    atomic.Int64 // changes only while state is sealed (a new lease)
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
	// startState is the state a lease started from: a generator still at
	// it has issued nothing under that lease.
	startState atomic.Int64

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
	g.node.Store(s.Datacenter<<g.l.WorkerBits | s.Worker)
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
// A leased generator's worker changes when it takes a new lease.
func (g *Generator) Datacenter() int64 { return g.node.Load() >> g.l.WorkerBits }
func (g *Generator) Worker() int64     { return g.node.Load() & (1<<g.l.WorkerBits - 1) }

// NextID returns the next id. Ids from one generator strictly increase.
// When a tick's sequence is used up it waits for the next tick; when the
// clock is behind the last id it waits up to Settings.MaxBackstep and
// otherwise returns ErrClockMovedBackwards. A leased generator returns
// ErrLeaseExpired, ErrLeaseLost or ErrClosed once it may not issue.
func (g *Generator) NextID() (int64, error) {
	first, _, node, err := g.reserve(1)
	if err != nil {
		return 0, err
	}
	return g.l.compose(first>>g.l.SeqBits, node, first&g.l.seqMask()), nil
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
	first, n, node, err := g.reserve(int64(len(dst)))
	if err != nil {
		return 0, err
	}
	tick, seq := first>>g.l.SeqBits, first&g.l.seqMask()
	for i := range n {
		dst[i] = g.l.compose(tick, node, seq+int64(i))
	}
	return int(n), nil
}

// reserve moves the state up by up to want values of one tick and returns
// the first of them (tick << SeqBits | seq), how many it took and the node
// they belong to.
func (g *Generator) reserve(want int64) (first, n, node int64, err error) {
	l := &g.l
	for {
		// The state is read before the clock: the tick in it then comes
		// from an earlier reading than ours, so a goroutine delayed
		// between the two reads cannot mistake others' progress for the
		// clock stepping back.
		old := g.state.Load()
		// The node after the state: a new lease stores the node before it
		// unseals the state, and a CAS from a state older than the seal
		// fails, so a successful CAS below pairs old with its node.
		node = g.node.Load()
		now := g.now()
		if old == sealed || now.Sub(g.base) > time.Duration(g.deadline.Load()) {
			return 0, 0, 0, g.stopped()
		}
		tick := l.tickOf(now.UnixMilli())
		if tick < 0 {
			return 0, 0, 0, fmt.Errorf("%w: %s is before the epoch", ErrOverTimeLimit, now.UTC().Format(time.RFC3339Nano))
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
				if g.lease != nil && old == g.startState.Load() {
					return 0, 0, 0, fmt.Errorf("%w: its previous holders used times up to %s ahead of this clock", ErrLeaseNotYetUsable, d.Round(time.Millisecond))
				}
				return 0, 0, 0, fmt.Errorf("%w: %s behind the last id (waits out up to %s)", ErrClockMovedBackwards, d, max(g.maxBack, 0))
			}
			g.sleep(d)
			continue
		}
		if tick > g.ceiling.Load() {
			if tick > l.maxTicks() {
				return 0, 0, 0, fmt.Errorf("%w: %s is past the layout's last time", ErrOverTimeLimit, now.UTC().Format(time.RFC3339Nano))
			}
			// The clock ran past what the lease row promises: issuing
			// now could overlap the next holder of this worker.
			return 0, 0, 0, fmt.Errorf("%w: clock past the time the lease covers", ErrLeaseExpired)
		}
		n = min(want, l.seqMask()-next&l.seqMask()+1)
		if g.state.CompareAndSwap(old, next+n-1) {
			return next, n, node, nil
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

// Ready reports whether NextID could issue now: nil, or the error it
// would return (the lease not renewed or lost, the worker not usable yet,
// the clock behind the last id or outside the layout, closed). It issues
// nothing.
func (g *Generator) Ready() error {
	l := &g.l
	old := g.state.Load()
	now := g.now()
	if old == sealed || now.Sub(g.base) > time.Duration(g.deadline.Load()) {
		return g.stopped()
	}
	tick := l.tickOf(now.UnixMilli())
	switch {
	case tick < 0 || tick > l.maxTicks():
		return fmt.Errorf("%w: %s", ErrOverTimeLimit, now.UTC().Format(time.RFC3339Nano))
	case old >= 0 && old>>l.SeqBits > tick:
		d := time.Duration(l.tickStart(old>>l.SeqBits)*int64(time.Millisecond) - now.UnixNano())
		if d > g.maxBack {
			if g.lease != nil && old == g.startState.Load() {
				return fmt.Errorf("%w: its previous holders used times up to %s ahead of this clock", ErrLeaseNotYetUsable, d.Round(time.Millisecond))
			}
			return fmt.Errorf("%w: %s behind the last id", ErrClockMovedBackwards, d.Round(time.Millisecond))
		}
	case tick > g.ceiling.Load():
		return fmt.Errorf("%w: clock past the time the lease covers", ErrLeaseExpired)
	}
	return nil
}

// repoint points a leased generator at a lease: its node, ids after the
// Unix millisecond prevMs (and after any id it issued before), the local
// deadline and the ceiling tick. The state is sealed or unused when it is
// called (by the keeper, which alone seals it when a lease is lost).
func (g *Generator) repoint(node, prevMs int64, deadline time.Duration, ceiling int64) {
	floor := int64(-1)
	if t := g.l.tickOf(prevMs); prevMs > 0 && t >= 0 {
		floor = t<<g.l.SeqBits | g.l.seqMask()
	}
	if old := g.state.Load(); old == sealed {
		if last := g.lastTick.Load(); last >= 0 {
			floor = max(floor, last<<g.l.SeqBits|g.l.seqMask())
		}
	} else {
		floor = max(floor, old)
	}
	g.node.Store(node)
	g.stopErr.Store(nil)
	g.extend(deadline, ceiling)
	g.startState.Store(floor)
	g.state.Store(floor) // unseals: the node above is in place
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

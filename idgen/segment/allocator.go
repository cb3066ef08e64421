package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Step adaptation thresholds: a segment that lasted at most FastSegment
// doubles the step, one that lasted more than SlowSegment halves it.
const (
	FastSegment = 10 * time.Second
	SlowSegment = 10 * time.Minute
)

// Option adjusts an Allocator. Options are checked when New builds it:
// New returns the error of one given a value it cannot use (ErrConfig),
// naming it (the convention of every package of shardid: see shardmgr's
// doc.go).
type Option func(*options) error

type options struct {
	now         func() time.Time
	logger      *slog.Logger
	prepare     func(context.Context, int) error
	threshold   int
	probeEvery  time.Duration
	callTimeout time.Duration
	prepTimeout time.Duration
	retryEvery  time.Duration
	onBreaker   func(source int, state BreakerState)
}

// Defaults of the allocator's options.
const (
	// DefaultBreakerFailures is how many consecutive failures open a
	// source's circuit breaker unless WithBreaker says.
	DefaultBreakerFailures = 3
	// DefaultBreakerProbe is how often an open breaker probes its source
	// unless WithBreaker says.
	DefaultBreakerProbe = time.Second
	// DefaultCallTimeout bounds each database call unless WithCallTimeout
	// says.
	DefaultCallTimeout = 3 * time.Second
	// DefaultPrepareTimeout bounds one attempt to prepare a source unless
	// WithPrepareTimeout says.
	DefaultPrepareTimeout = 2 * time.Minute
)

func optionError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// WithClock sets the clock used for step adaptation and dates in formats
// (tests move it by hand); now must not be nil. Without it, time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return optionError("WithClock(nil): want a clock")
		}
		o.now = now
		return nil
	}
}

// WithLogger sets where the allocator logs breaker changes and load
// failures; l must not be nil (to discard, pass
// slog.New(slog.DiscardHandler)). Without it, slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return optionError("WithLogger(nil): want a logger (slog.New(slog.DiscardHandler) to discard)")
		}
		o.logger = l
		return nil
	}
}

// WithPrepare sets a hook run for every source as soon as New returns, in
// the background, and retried until it succeeds: typically creating the
// database and applying the segment migrations (migrations.Up with
// migrations.Segment), so that a source that was down at start is set up
// when it comes back. Until its hook succeeded a source serves no segment
// and the allocator is not Ready. Each attempt is bounded by
// WithPrepareTimeout, not by the (short) call timeout: creating a
// database can take seconds on a busy server. f must not be nil. Without
// it, the sources are used as they are.
func WithPrepare(f func(ctx context.Context, source int) error) Option {
	return func(o *options) error {
		if f == nil {
			return optionError("WithPrepare(nil): want a function")
		}
		o.prepare = f
		return nil
	}
}

// WithPrepareTimeout bounds each attempt of the prepare hook; d > 0.
// Without it, DefaultPrepareTimeout (2m).
func WithPrepareTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return optionError("WithPrepareTimeout(%s): want a positive timeout", d)
		}
		o.prepTimeout = d
		return nil
	}
}

// WithBreaker sets how many consecutive failures open a source's circuit
// breaker and how often an open breaker probes the source in the
// background; failures >= 1, probeEvery > 0. Without it,
// DefaultBreakerFailures (3) and DefaultBreakerProbe (1s).
func WithBreaker(failures int, probeEvery time.Duration) Option {
	return func(o *options) error {
		if failures < 1 || probeEvery <= 0 {
			return optionError("WithBreaker(%d, %s): want at least 1 failure and a positive probe interval", failures, probeEvery)
		}
		o.threshold, o.probeEvery = failures, probeEvery
		return nil
	}
}

// WithBreakerHook sets a function called whenever a source's breaker
// changes state (closed, open, half-open). It runs on the allocator's
// goroutines with the breaker locked, so it must return quickly. f must
// not be nil. Without it, nothing is called.
func WithBreakerHook(f func(source int, state BreakerState)) Option {
	return func(o *options) error {
		if f == nil {
			return optionError("WithBreakerHook(nil): want a function")
		}
		o.onBreaker = f
		return nil
	}
}

// WithCallTimeout bounds each database call; d > 0. Without it,
// DefaultCallTimeout (3s).
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return optionError("WithCallTimeout(%s): want a positive timeout", d)
		}
		o.callTimeout = d
		return nil
	}
}

// Allocator hands out ids of several business tags from segments taken
// from its source databases. It is safe for concurrent use.
type Allocator struct {
	opts    options
	sources []*source
	tags    map[string]*Tag
	rr      atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	started   chan struct{} // closed once every tag's first load attempt ended
	attempted atomic.Int64  // tags whose first load attempt ended
}

// New starts an allocator for tags over the source pools; pool i hands out
// the ids congruent to i modulo len(pools), so the order of pools is part
// of the id layout and must never change (see docs/segments.md to add a
// source). The pools stay the caller's: Close does not close them.
//
// New does not wait for the databases: every source is prepared (see
// WithPrepare) and every tag starts loading its first segment in the
// background, and the first calls wait for it; Ready says when every tag
// can be served.
func New(pools []*pgxpool.Pool, tags map[string]TagConfig, opts ...Option) (*Allocator, error) {
	if len(pools) == 0 {
		return nil, fmt.Errorf("%w: no source databases", ErrConfig)
	}
	if len(tags) == 0 {
		return nil, fmt.Errorf("%w: no tags", ErrConfig)
	}
	o := options{now: time.Now, logger: slog.Default(), threshold: DefaultBreakerFailures, probeEvery: DefaultBreakerProbe,
		callTimeout: DefaultCallTimeout, prepTimeout: DefaultPrepareTimeout, retryEvery: 100 * time.Millisecond}
	for _, opt := range opts {
		if opt == nil {
			return nil, optionError("nil Option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	a := &Allocator{opts: o, tags: make(map[string]*Tag, len(tags)), started: make(chan struct{})}
	for i, p := range pools {
		if p == nil {
			return nil, fmt.Errorf("%w: source %d: nil pool", ErrConfig, i)
		}
		s := &source{index: i, name: sourceName(p, i), pool: p}
		s.br.threshold = o.threshold
		if o.onBreaker != nil {
			s.br.onChange = func(st BreakerState) { o.onBreaker(i, st) }
		}
		s.br.since = o.now()
		a.sources = append(a.sources, s)
	}
	for _, name := range slices.Sorted(maps.Keys(tags)) {
		cfg := tags[name]
		if !tagName.MatchString(name) {
			return nil, fmt.Errorf("%w: tag %q: name must be 1-64 of A-Z a-z 0-9 _ . -", ErrConfig, name)
		}
		if err := cfg.validate(); err != nil {
			return nil, fmt.Errorf("%w: tag %s: %v", ErrConfig, name, err)
		}
		cfg = cfg.withDefaults()
		t := &Tag{name: name, a: a, cfg: cfg, skip: cfg.MaxSkip, wake: make(chan struct{}, 1), waitCh: make(chan struct{}), step: cfg.MinStep}
		if cfg.Format != "" {
			t.format, _ = CompileFormat(cfg.Format)
			_ = t.format.setBuckets(cfg.Buckets)
		}
		t.cur.Store(newSegment(0, 1, 0, -1)) // empty: the first call waits for a load
		t.stepNow.Store(cfg.MinStep)
		a.tags[name] = t
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	for _, s := range a.sources {
		if o.prepare == nil {
			s.prepared.Store(true)
			continue
		}
		s.prepareStart = time.Now()
		a.wg.Add(1)
		go a.prepareSource(s)
	}
	for _, t := range a.tags {
		a.wg.Add(1)
		go t.loader()
		t.kick()
	}
	return a, nil
}

// Close stops the background loaders and probes. Ids still in memory are
// lost (the databases have moved past them, so they are never reused).
func (a *Allocator) Close() {
	a.cancel()
	a.wg.Wait()
}

// Tag returns the handle of a configured tag, or nil. Keeping the handle
// saves a map lookup per call.
func (a *Allocator) Tag(name string) *Tag { return a.tags[name] }

// Tags returns the configured tag names, sorted.
func (a *Allocator) Tags() []string { return slices.Sorted(maps.Keys(a.tags)) }

// Next returns the next id of tag.
func (a *Allocator) Next(ctx context.Context, tag string) (int64, error) {
	t := a.tags[tag]
	if t == nil {
		return 0, fmt.Errorf("%w %q", ErrUnknownTag, tag)
	}
	return t.Next(ctx)
}

// Now returns the allocator's clock.
func (a *Allocator) Now() time.Time { return a.opts.now() }

func (a *Allocator) kickAll() {
	for _, t := range a.tags {
		t.kick()
	}
}

// load takes a segment of step ids for t from the next healthy source in
// rotation, falling over to the others when one fails.
func (a *Allocator) load(t *Tag, step int64) (*segment, error) {
	n := len(a.sources)
	for _, s := range a.sources {
		if s.firstPrepare(firstPrepareWait) {
			return nil, errPreparing
		}
	}
	start := int(a.rr.Add(1) % uint64(n))
	var errs []error
	for i := range n {
		s := a.sources[(start+i)%n]
		if !s.prepared.Load() {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, s.notPrepared()))
			continue
		}
		if !s.br.allow() {
			continue
		}
		ctx, cancel := context.WithTimeout(a.ctx, a.opts.callTimeout)
		seg, err := a.loadFrom(ctx, s, t.name, step)
		cancel()
		if err == nil {
			s.loads.Add(1)
			s.br.success(a.opts.now())
			return seg, nil
		}
		if a.ctx.Err() != nil {
			return nil, ErrClosed
		}
		errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		if s.br.failure(a.opts.now(), err) {
			a.opts.logger.Warn("segment source cut off", "source", s.name, "err", err)
		}
		// Probe from the first failure, so that a source that answers
		// again is seen as well (and healthy) before the next load.
		if s.probing.CompareAndSwap(false, true) {
			a.wg.Add(1)
			go a.probe(s)
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("tag %s: %w: every source is cut off by its circuit breaker", t.name, ErrUnavailable)
	}
	return nil, fmt.Errorf("tag %s: %w: %w", t.name, ErrUnavailable, errors.Join(errs...))
}

func (a *Allocator) loadFrom(ctx context.Context, s *source, tag string, step int64) (*segment, error) {
	return a.take(ctx, s, tag, step, len(a.sources))
}

// Tag is one business tag: its current segment, the preloaded next one,
// and the loader that fetches segments in the background.
type Tag struct {
	name   string
	a      *Allocator
	cfg    TagConfig
	format *Format
	skip   int64

	cur  atomic.Pointer[segment]
	next atomic.Pointer[segment]

	wake    chan struct{} // wakes the loader; capacity 1, so kicks coalesce
	mu      sync.Mutex
	waitCh  chan struct{} // closed after each load attempt
	lastErr error         // of the last load attempt

	// loader goroutine only
	step     int64
	lastLoad time.Time
	failing  bool

	stepNow   atomic.Int64
	loads     atomic.Uint64
	loadFails atomic.Uint64
	attempted atomic.Bool // a first load attempt ended
}

// Name returns the tag's name.
func (t *Tag) Name() string { return t.name }

// Format returns the tag's business format, or nil for plain numbers.
func (t *Tag) Format() *Format { return t.format }

// Next returns the next id. In steady state it is one atomic add on the
// current segment; it waits for the database only when both the current
// and the preloaded segment are used up, and returns an error wrapping
// ErrUnavailable when no source can give a new one.
func (t *Tag) Next(ctx context.Context) (int64, error) {
	for {
		s := t.cur.Load()
		inc := int64(1)
		if t.skip > 0 {
			inc += rand.Int64N(t.skip)
		}
		k := s.cursor.Add(inc) - inc
		if k < s.size {
			if k >= s.preloadAt {
				t.preload(s)
			}
			return s.id(k), nil
		}
		if err := t.advance(ctx, s); err != nil {
			return 0, err
		}
	}
}

// Fill fills ids with the next len(ids) ids, taking each segment's share
// with one atomic add. On error the ids already claimed are dropped: a
// gap, never a duplicate. It returns how many ids it filled.
func (t *Tag) Fill(ctx context.Context, ids []int64) (int, error) {
	if t.skip > 0 {
		for i := range ids {
			id, err := t.Next(ctx)
			if err != nil {
				return i, err
			}
			ids[i] = id
		}
		return len(ids), nil
	}
	done := 0
	for done < len(ids) {
		s := t.cur.Load()
		want := int64(len(ids) - done)
		k := s.cursor.Add(want) - want
		if k < s.size {
			got := min(want, s.size-k)
			for j := range got {
				ids[done+int(j)] = s.id(k + j)
			}
			done += int(got)
			if k+got > s.preloadAt {
				t.preload(s)
			}
			continue
		}
		if err := t.advance(ctx, s); err != nil {
			return done, err
		}
	}
	return done, nil
}

func (t *Tag) preload(s *segment) {
	if !s.triggered.Load() && s.triggered.CompareAndSwap(false, true) {
		t.kick()
	}
}

func (t *Tag) kick() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// advance replaces the used-up segment s by the preloaded one, or waits
// for the loader.
func (t *Tag) advance(ctx context.Context, s *segment) error {
	if t.swap(s) {
		return nil
	}
	t.mu.Lock()
	ch := t.waitCh
	t.mu.Unlock()
	// Checked again after taking ch, so a load finishing in between is seen.
	if t.swap(s) {
		return nil
	}
	t.kick()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.a.ctx.Done():
		return ErrClosed
	}
	if t.swap(s) {
		return nil
	}
	t.mu.Lock()
	err := t.lastErr
	t.mu.Unlock()
	return err
}

// swap reports whether the caller can retry: the current segment is no
// longer s (someone swapped), or s was swapped for the preloaded one now.
func (t *Tag) swap(s *segment) bool {
	if t.cur.Load() != s {
		return true
	}
	n := t.next.Load()
	if n == nil {
		return false
	}
	if t.cur.CompareAndSwap(s, n) {
		t.next.CompareAndSwap(n, nil)
	}
	return true
}

// loader is the one goroutine per tag that talks to the databases, so
// that a burst of callers never turns into a burst of loads.
func (t *Tag) loader() {
	a := t.a
	defer a.wg.Done()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.wake:
		}
		// Kicks coalesce and may be stale (a caller waiting for a load
		// that already finished), so load only when the segment in use is
		// past its preload point or used up; retry until then, so that
		// the tag comes back by itself when a source does.
		for t.next.Load() == nil && t.needed() {
			err := t.loadNext()
			if errors.Is(err, errPreparing) {
				break // the source's preparer kicks every tag when done
			}
			t.signal(err)
			if err == nil {
				break
			}
			select {
			case <-a.ctx.Done():
				return
			case <-time.After(a.opts.retryEvery):
			}
		}
		if t.next.Load() != nil {
			t.signal(nil)
		}
	}
}

func (t *Tag) needed() bool {
	c := t.cur.Load()
	return c.triggered.Load() || c.left() == 0
}

func (t *Tag) loadNext() error {
	now := t.a.opts.now()
	step := t.step
	if !t.lastLoad.IsZero() {
		switch d := now.Sub(t.lastLoad); {
		case d <= FastSegment:
			step = min(step*2, t.cfg.MaxStep)
		case d > SlowSegment:
			step = max(step/2, t.cfg.MinStep)
		}
	}
	seg, err := t.a.load(t, step)
	if errors.Is(err, errPreparing) {
		return err
	}
	if err != nil {
		t.loadFails.Add(1)
		if !errors.Is(err, ErrClosed) && !t.failing {
			t.a.opts.logger.Warn("segment load failed; retrying in the background", "tag", t.name, "err", err)
		}
		t.failing = true
		return err
	}
	// The call that takes position preloadAt leaves the preload share.
	seg.preloadAt = seg.size - max(1, int64(float64(seg.size)*t.cfg.Preload)) - 1
	if t.failing {
		t.a.opts.logger.Info("segment loads work again", "tag", t.name)
	}
	t.step, t.lastLoad, t.failing = step, now, false
	t.stepNow.Store(step)
	t.loads.Add(1)
	t.next.Store(seg)
	return nil
}

// signal wakes the callers waiting for a load attempt.
func (t *Tag) signal(err error) {
	t.mu.Lock()
	t.lastErr = err
	close(t.waitCh)
	t.waitCh = make(chan struct{})
	t.mu.Unlock()
	if !t.attempted.Swap(true) && t.a.attempted.Add(1) == int64(len(t.a.tags)) {
		close(t.a.started)
	}
}

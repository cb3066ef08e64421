package segment

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is the state of a source's circuit breaker.
type BreakerState int32

const (
	// Closed: the source is used.
	Closed BreakerState = iota
	// Open: the source failed repeatedly and is cut off; a background
	// probe checks it every probe interval.
	Open
	// HalfOpen: a probe is talking to the source right now.
	HalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

// breaker counts consecutive failures of one source. The state is read
// with one atomic load on the load path; changes take the mutex.
type breaker struct {
	state atomic.Int32

	mu        sync.Mutex
	failures  int    // consecutive
	total     uint64 // every failure since the start, probes included
	threshold int
	lastErr   error
	since     time.Time
	trips     uint64
	onChange  func(BreakerState) // called with mu held
}

func (b *breaker) store(s BreakerState) {
	if BreakerState(b.state.Swap(int32(s))) != s && b.onChange != nil {
		b.onChange(s)
	}
}

func (b *breaker) allow() bool { return BreakerState(b.state.Load()) == Closed }

func (b *breaker) success(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = 0
	b.lastErr = nil
	if BreakerState(b.state.Load()) != Closed {
		b.store(Closed)
		b.since = now
	}
}

// failure records a failed call and reports whether it opened the breaker.
func (b *breaker) failure(now time.Time, err error) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.total++
	b.lastErr = err
	if BreakerState(b.state.Load()) == Closed && b.failures >= b.threshold {
		b.store(Open)
		b.since = now
		b.trips++
		return true
	}
	return false
}

// set moves an open breaker between Open and HalfOpen (probes).
func (b *breaker) set(s BreakerState, now time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if BreakerState(b.state.Load()) == Closed {
		return
	}
	b.store(s)
	if err != nil {
		b.lastErr = err
		b.failures++
		b.total++
	}
	b.since = now
}

// snapshot reads the breaker under its lock, so that failures (the
// consecutive ones) never exceeds total.
func (b *breaker) snapshot() (state BreakerState, failures int, total uint64, lastErr error, since time.Time, trips uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BreakerState(b.state.Load()), b.failures, b.total, b.lastErr, b.since, b.trips
}

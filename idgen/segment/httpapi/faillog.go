package httpapi

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultFailureLogInterval is how often, at most, a tag that keeps
// failing gets a summary line (WithFailureLogInterval).
const DefaultFailureLogInterval = 10 * time.Second

// failLog turns a tag's failed requests into a few log lines: one when
// the tag starts failing, at most one summary per interval while it goes
// on (how many requests failed since the last line), and one when it
// serves again. A source that is down must not cost a line per request.
type failLog struct {
	tag     string
	every   time.Duration
	failing atomic.Bool // read on every successful request: one load

	mu      sync.Mutex
	since   time.Time // first failure of this run
	last    time.Time // last line written
	pending int       // failures not yet in a line
	total   int       // failures in this run
	lastErr string
}

func (f *failLog) failed(log *slog.Logger, now time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total++
	f.pending++
	f.lastErr = err.Error()
	if !f.failing.Load() {
		f.failing.Store(true)
		f.since, f.last, f.pending = now, now, 0
		log.Warn("cannot serve ids; further failures are summarised", "tag", f.tag, "err", f.lastErr, "every", f.every)
		return
	}
	if now.Sub(f.last) >= f.every {
		log.Warn("still cannot serve ids", "tag", f.tag, "failed_requests", f.pending,
			"in", now.Sub(f.last).Round(time.Millisecond), "failing_for", now.Sub(f.since).Round(time.Millisecond), "err", f.lastErr)
		f.last, f.pending = now, 0
	}
}

func (f *failLog) served(log *slog.Logger, now time.Time) {
	if !f.failing.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failing.Load() {
		return
	}
	log.Info("serving ids again", "tag", f.tag, "failed_requests", f.total, "failing_for", now.Sub(f.since).Round(time.Millisecond))
	f.failing.Store(false)
	f.total, f.pending = 0, 0
}

package segment

import "time"

// SourceHealth is the state of one source database as the allocator sees
// it.
type SourceHealth struct {
	Index     int       `json:"index"`
	Name      string    `json:"name"`
	State     string    `json:"state"` // closed, open or half-open
	Since     time.Time `json:"since"`
	Failures  int       `json:"consecutive_failures"`
	LastError string    `json:"last_error,omitempty"`
	Loads     uint64    `json:"segment_loads"`
	Trips     uint64    `json:"breaker_trips"`

	state BreakerState
	fails uint64
}

// BreakerState returns the state as a value.
func (h SourceHealth) BreakerState() BreakerState { return h.state }

// FailuresTotal returns how many loads from this source failed since the
// allocator started.
func (h SourceHealth) FailuresTotal() uint64 { return h.fails }

// Health reports every source's circuit breaker.
func (a *Allocator) Health() []SourceHealth {
	out := make([]SourceHealth, len(a.sources))
	for i, s := range a.sources {
		state, failures, lastErr, since, trips := s.br.snapshot()
		h := SourceHealth{Index: i, Name: s.name, State: state.String(), Since: since, Failures: failures,
			Loads: s.loads.Load(), Trips: trips, state: state, fails: s.failures.Load()}
		if lastErr != nil {
			h.LastError = lastErr.Error()
		}
		out[i] = h
	}
	return out
}

// TagStats describes one tag's allocation.
type TagStats struct {
	Name         string `json:"name"`
	Step         int64  `json:"step"`
	Loads        uint64 `json:"segment_loads"`
	LoadFailures uint64 `json:"load_failures"`
	// InMemory is how many ids the current and preloaded segments still
	// hold (fewer are handed out when the tag skips at random).
	InMemory int64 `json:"in_memory"`
}

// Stats reports every tag, sorted by name.
func (a *Allocator) Stats() []TagStats {
	out := make([]TagStats, 0, len(a.tags))
	for _, name := range a.Tags() {
		out = append(out, a.tags[name].Stats())
	}
	return out
}

// Stats reports the tag's allocation.
func (t *Tag) Stats() TagStats {
	left := t.cur.Load().left()
	if n := t.next.Load(); n != nil {
		left += n.left()
	}
	return TagStats{Name: t.name, Step: t.stepNow.Load(), Loads: t.loads.Load(), LoadFailures: t.loadFails.Load(), InMemory: left}
}

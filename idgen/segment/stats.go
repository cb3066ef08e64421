package segment

import "time"

// SourceHealth is the state of one source database as the allocator sees
// it.
type SourceHealth struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// State is the breaker's: closed, open or half-open; or preparing
	// while the source's database and table are being set up (WithPrepare).
	State    string    `json:"state"`
	Since    time.Time `json:"since"`
	Failures int       `json:"consecutive_failures"`
	// FailuresTotal is every failed call since the start, loads and
	// probes alike: the count shardid_segment_source_failures_total shows.
	FailuresTotal uint64 `json:"failures_total"`
	LastError     string `json:"last_error,omitempty"`
	Loads         uint64 `json:"segment_loads"`
	Trips         uint64 `json:"breaker_trips"`

	state    BreakerState
	prepared bool
}

// BreakerState returns the state as a value.
func (h SourceHealth) BreakerState() BreakerState { return h.state }

// Usable reports whether the source is prepared and its breaker closed
// with no failure since its last success.
func (h SourceHealth) Usable() bool { return h.prepared && h.state == Closed && h.Failures == 0 }

// Health reports every source's circuit breaker.
func (a *Allocator) Health() []SourceHealth {
	out := make([]SourceHealth, len(a.sources))
	for i, s := range a.sources {
		state, failures, total, lastErr, since, trips := s.br.snapshot()
		h := SourceHealth{Index: i, Name: s.name, State: state.String(), Since: since, Failures: failures,
			Loads: s.loads.Load(), Trips: trips, state: state, FailuresTotal: total, prepared: s.prepared.Load()}
		if lastErr != nil {
			h.LastError = lastErr.Error()
		}
		if !h.prepared {
			h.State = "preparing"
			if err := s.notPrepared(); h.LastError == "" {
				h.LastError = err.Error()
			}
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

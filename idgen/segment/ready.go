package segment

import (
	"context"
	"fmt"
	"strings"
)

// Ready reports whether every tag can be served now and every source is
// usable (SourceHealth.Usable): nil, or an error naming what is not. A
// load balancer should send no traffic to a process that is not ready.
func (a *Allocator) Ready() error {
	var probs []string
	for _, h := range a.Health() {
		if !h.Usable() {
			p := fmt.Sprintf("source %s is %s", h.Name, h.State)
			if h.State == "closed" {
				p = fmt.Sprintf("source %s failed %d times since its last success", h.Name, h.Failures)
			}
			if h.LastError != "" {
				p += ": " + h.LastError
			}
			probs = append(probs, p)
		}
	}
	for _, name := range a.Tags() {
		t := a.tags[name]
		if t.loads.Load() == 0 {
			probs = append(probs, fmt.Sprintf("tag %s has no segment yet", name))
		} else if t.Stats().InMemory == 0 && t.loadFailing() {
			probs = append(probs, fmt.Sprintf("tag %s has no ids left and its loads fail", name))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrNotReady, strings.Join(probs, "; "))
	}
	return nil
}

func (t *Tag) loadFailing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastErr != nil
}

// WaitStarted waits until every tag's first load attempt has ended (with
// a segment or an error), or ctx ends. A service holds its first requests
// with it, so that they and the /healthz after them see the start-up
// finished rather than half of the tags loaded.
func (a *Allocator) WaitStarted(ctx context.Context) error {
	select {
	case <-a.started:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.ctx.Done():
		return ErrClosed
	}
}

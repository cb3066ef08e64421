package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shardid/shardid/shardmgr/migrate"

	"golang.org/x/term"
)

// hostBars draws one progress line per host on w when w is a terminal,
// redrawing them in place; messages (lock waits) are printed above them.
// When w is not a terminal the bars are not drawn and messages are plain
// lines. It is safe for concurrent use.
type hostBars struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool
	label string
	hosts []string
	state map[string]migrate.HostProgress
	drawn int // lines currently drawn
	last  time.Time
	waits map[string]int
}

func newHostBars(w io.Writer, label string) *hostBars {
	f, ok := w.(*os.File)
	return &hostBars{w: w, label: label, on: ok && term.IsTerminal(int(f.Fd())),
		state: map[string]migrate.HostProgress{}, waits: map[string]int{}}
}

// Update records a host's progress and redraws, at most ten times a second
// except when a host finishes.
func (b *hostBars) Update(p migrate.HostProgress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.state[p.Host]; !ok {
		b.hosts = append(b.hosts, p.Host)
		slices.Sort(b.hosts)
	}
	b.state[p.Host] = p
	if !b.on || (time.Since(b.last) < 100*time.Millisecond && p.Done < p.Total) {
		return
	}
	b.redraw()
}

// maxWaitLines is how many lock waits per host are reported one by one.
const maxWaitLines = 3

// Waiting reports that a shard waits for another run's lock.
func (b *hostBars) Waiting(w migrate.LockWait) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waits[w.Host]++
	var msg string
	switch n := b.waits[w.Host]; {
	case n <= maxWaitLines:
		holder := "another run"
		if w.HolderPID != 0 {
			holder = fmt.Sprintf("another run (backend pid %d)", w.HolderPID)
		}
		msg = fmt.Sprintf("waiting for lock on shard %d on %s: %s holds it", w.Shard, w.Host, holder)
	case n == maxWaitLines+1:
		msg = fmt.Sprintf("more shards on %s are waiting for another run; not reporting each", w.Host)
	default:
		return
	}
	b.clear()
	fmt.Fprintln(b.w, msg)
	if b.on {
		b.redraw()
	}
}

// Done leaves the final bars on the screen.
func (b *hostBars) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.on && len(b.hosts) > 0 {
		b.redraw()
	}
	b.drawn = 0
}

func (b *hostBars) clear() {
	if b.drawn == 0 {
		return
	}
	fmt.Fprintf(b.w, "\x1b[%dA", b.drawn)
	for range b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K\n")
	}
	fmt.Fprintf(b.w, "\x1b[%dA", b.drawn)
	b.drawn = 0
}

func (b *hostBars) redraw() {
	b.last = time.Now()
	if b.drawn > 0 {
		fmt.Fprintf(b.w, "\x1b[%dA", b.drawn)
	}
	width := 0
	for _, h := range b.hosts {
		width = max(width, len(h))
	}
	const barWidth = 30
	for _, h := range b.hosts {
		p := b.state[h]
		filled := 0
		if p.Total > 0 {
			filled = p.Done * barWidth / p.Total
		}
		failed := ""
		if p.Failed > 0 {
			failed = fmt.Sprintf(", %d failed", p.Failed)
		}
		fmt.Fprintf(b.w, "\r\x1b[K%s %-*s [%s%s] %d/%d%s\n", b.label, width, h,
			strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), p.Done, p.Total, failed)
	}
	b.drawn = len(b.hosts)
}

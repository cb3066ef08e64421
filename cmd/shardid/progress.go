package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// Progress goes to stderr and is drawn by github.com/vbauerster/mpb/v8,
// chosen because it keeps several bars on screen at once (one per host
// while migrating, one per move while rebalancing) and prints plain lines
// above them, because it is maintained, and because it is pure Go (no
// cgo). Bars are drawn only when the writer is a terminal; elsewhere
// nothing is drawn and messages are plain lines, for scripts and logs.

// progress is a set of bars on one writer. It is safe for concurrent use.
type progress struct {
	w         io.Writer
	p         *mpb.Progress // nil: w is not a terminal, nothing is drawn
	transient bool          // bars vanish at Done (bench)

	mu   sync.Mutex
	bars map[string]*bar
	done bool
}

// bar is one bar and the text drawn after it.
type bar struct {
	b      *mpb.Bar
	status atomic.Value // string; read by mpb's drawing, so no lock
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newProgress(w io.Writer) *progress { return newProgressOn(w, isTerminal(w)) }

// newProgressOn draws on w when draw is set, terminal or not (tests).
func newProgressOn(w io.Writer, draw bool) *progress {
	pr := &progress{w: w, bars: map[string]*bar{}}
	if draw {
		pr.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(30), mpb.WithRefreshRate(100*time.Millisecond), mpb.WithAutoRefresh())
	}
	return pr
}

// set draws bar key, labelled label, at done of total, with status after
// it.
func (pr *progress) set(key, label string, done, total int64, status string) {
	if pr.p == nil {
		return
	}
	pr.mu.Lock()
	if pr.done {
		pr.mu.Unlock()
		return
	}
	br, ok := pr.bars[key]
	if !ok {
		br = &bar{}
		br.status.Store(status)
		br.b = pr.p.AddBar(max(total, 1),
			mpb.PrependDecorators(decor.Name(label, decor.WCSyncSpaceR)),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return br.status.Load().(string) })))
		pr.bars[key] = br
	}
	pr.mu.Unlock()
	br.status.Store(status)
	if total > 0 {
		br.b.SetTotal(total, false)
	}
	br.b.SetCurrent(done)
}

// Println prints msg on a line of its own: above the bars on a terminal.
func (pr *progress) Println(msg string) {
	pr.mu.Lock()
	drawing := pr.p != nil && !pr.done
	pr.mu.Unlock()
	if drawing {
		if _, err := fmt.Fprintln(pr.p, msg); err == nil {
			return
		}
	}
	fmt.Fprintln(pr.w, msg)
}

// Done stops drawing and leaves the bars as they are (transient ones go).
func (pr *progress) Done() {
	if pr.p == nil {
		return
	}
	pr.mu.Lock()
	if pr.done {
		pr.mu.Unlock()
		return
	}
	pr.done = true
	for _, br := range pr.bars {
		if pr.transient || !br.b.Completed() {
			br.b.Abort(pr.transient)
		}
	}
	pr.mu.Unlock()
	pr.p.Wait()
}

// counter is a bar of done out of total, for Init's and the bench's
// progress callbacks.
func (pr *progress) counter(label string) func(done, total int) {
	return func(done, total int) {
		pr.set(label, label, int64(done), int64(total), fmt.Sprintf("%d/%d", done, total))
	}
}

// hostBars draws a bar per host for a migration run and reports lock
// waits as lines.
type hostBars struct {
	*progress
	label string
	mu    sync.Mutex
	waits map[string]int
}

func newHostBars(w io.Writer, label string) *hostBars {
	return &hostBars{progress: newProgress(w), label: label, waits: map[string]int{}}
}

// Update redraws a host's bar.
func (b *hostBars) Update(p migrate.HostProgress) {
	status := fmt.Sprintf("%d/%d", p.Done, p.Total)
	if p.Failed > 0 {
		status += fmt.Sprintf(", %d failed", p.Failed)
	}
	b.set(p.Host, b.label+" "+p.Host, int64(p.Done), int64(p.Total), status)
}

// maxWaitLines is how many lock waits per host are reported one by one.
const maxWaitLines = 3

// Waiting reports that a shard waits for another run's lock.
func (b *hostBars) Waiting(w migrate.LockWait) {
	b.mu.Lock()
	b.waits[w.Host]++
	n := b.waits[w.Host]
	b.mu.Unlock()
	switch {
	case n <= maxWaitLines:
		holder := "another run"
		if w.HolderPID != 0 {
			holder = fmt.Sprintf("another run (backend pid %d)", w.HolderPID)
		}
		b.Println(fmt.Sprintf("waiting for lock on shard %d on %s: %s holds it", w.Shard, w.Host, holder))
	case n == maxWaitLines+1:
		b.Println(fmt.Sprintf("more shards on %s are waiting for another run; not reporting each", w.Host))
	}
}

// moveBars draws a bar per move: its phase among its mode's phases, and
// rows, size and replication lag after it. Where nothing is drawn (no
// terminal) it prints a line per phase change instead, so that a run in a
// script or a log still shows where each move stands.
type moveBars struct {
	*progress
	mu    sync.Mutex
	phase map[int64]rebalance.Phase // the last phase printed per move
}

func newMoveProgress(w io.Writer) *moveBars { return newMoveProgressOn(w, isTerminal(w)) }

func newMoveProgressOn(w io.Writer, draw bool) *moveBars {
	return &moveBars{progress: newProgressOn(w, draw), phase: map[int64]rebalance.Phase{}}
}

// phaseLine prints "move 3 shard 16 pg1 -> pg4: copy" when the move
// entered a phase not yet printed.
func (p *moveBars) phaseLine(mp rebalance.MoveProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.phase[mp.ID] == mp.Phase {
		return
	}
	p.phase[mp.ID] = mp.Phase
	fmt.Fprintf(p.w, "move %d shard %d %s -> %s: %s\n", mp.ID, mp.Shard, mp.From, mp.To, mp.Phase)
}

func (p *moveBars) Update(mp rebalance.MoveProgress) {
	if p.p == nil {
		p.phaseLine(mp)
		return
	}
	var b strings.Builder
	b.WriteString(string(mp.Phase))
	if mp.Tables > 0 && mp.Phase == rebalance.PhaseCatchup {
		fmt.Fprintf(&b, ", %d/%d tables copied", mp.Synced, mp.Tables)
	}
	if mp.Rows > 0 {
		fmt.Fprintf(&b, ", %d rows", mp.Rows)
	}
	if mp.Bytes > 0 {
		fmt.Fprintf(&b, ", %s", byteSize(mp.Bytes))
	}
	if mp.Lag >= 0 {
		fmt.Fprintf(&b, ", lag %s", byteSize(mp.Lag))
	}
	label := fmt.Sprintf("move %d: shard %d %s -> %s", mp.ID, mp.Shard, mp.From, mp.To)
	p.set(fmt.Sprint(mp.ID), label, int64(mp.Step), int64(mp.Steps), b.String())
}

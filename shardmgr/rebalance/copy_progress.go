package rebalance

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// A table's COPY reports its row count only when it ends, and a move of a
// big shard is mostly one copy: the journal said 0 rows for 8 s of an
// 11 s move, then jumped (issue 29). So each copy counts the rows it
// sends as they go, and while a move copies, the rows so far reach the
// journal (rows_copied: rebalance status --json, the console) and
// MoveOptions.Progress every copyProgressEvery.

// copyProgressEvery is how often the rows a move has copied so far reach
// the journal during the copy (the goal: at least every 2 s).
const copyProgressEvery = time.Second

// copyCounter counts the rows a move's copies have sent so far.
type copyCounter struct {
	rows atomic.Int64
	// row, in tests, runs as each row is sent, with the rows so far;
	// while it runs, that copy waits (MoveOptions' hooks.copyRow).
	row func(rows int64)
}

// countRows passes a COPY's stream to w, counting its rows into c as
// pgconn's CopyTo writes them: one write per CopyData message, which the
// protocol sends one per row (the first row of binary COPY carries the
// header too); binary COPY's trailer, a field count of -1, comes as a
// message of its own and is no row.
func (c *copyCounter) countRows(w io.Writer) io.Writer {
	if c == nil {
		return w
	}
	return rowWriter{w: w, c: c}
}

type rowWriter struct {
	w io.Writer
	c *copyCounter
}

func (r rowWriter) Write(p []byte) (int, error) {
	if len(p) != 2 || p[0] != 0xff || p[1] != 0xff {
		n := r.c.rows.Add(1)
		if r.c.row != nil {
			r.c.row(n)
		}
	}
	return r.w.Write(p)
}

// reportCopy writes the rows counted so far into mv's journal row and
// reports them to MoveOptions.Progress every copyProgressEvery (the
// hooks' copyProgressEvery in tests) while a copy of tables runs, from
// done rows on (those of tables copied before); the returned function
// stops it, and returns when it has. A journal write that fails is
// logged and tried again at the next tick: the copy goes on.
func (mo *mover) reportCopy(ctx context.Context, mv *move, tables int, done int64, c *copyCounter) (stop func()) {
	every := mo.opts.copyProgressEvery
	if every <= 0 {
		every = copyProgressEvery
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		last := int64(-1)
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n := done + c.rows.Load()
			if n == last {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, max(every, 5*time.Second))
			err := catalog.JournalRows(wctx, mo.catalog, mv.ID, n)
			cancel()
			if err != nil {
				mo.log.Warn("journal the rows copied so far", "id", mv.ID, "err", err)
				continue
			}
			last = n
			mo.progress(mv.MoveRecord, MoveProgress{Phase: PhaseCopy, Tables: tables, Rows: n, Lag: -1})
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

package segment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/pgtrust"
)

// One round trip per segment. The stride and residue in the WHERE clause
// make a source refuse to serve under a layout other than the one its row
// was created with, so a reordered or resized source list cannot collide.
const (
	takeSQL = `UPDATE shardid.segments
   SET max_id = max_id + $2::bigint * stride, step = $2, updated_at = now()
 WHERE tag = $1 AND stride = $3 AND residue = $4 AND NOT fenced
RETURNING max_id`
	createSQL = `INSERT INTO shardid.segments (tag, max_id, step, stride, residue)
VALUES ($1, $5, $2, $3, $4) ON CONFLICT (tag) DO NOTHING`
	layoutSQL  = `SELECT stride, residue, fenced FROM shardid.segments WHERE tag = $1`
	highestSQL = `SELECT max_id FROM shardid.segments WHERE tag = $1`
)

// source is one database handing out the ids congruent to index modulo
// the number of sources.
type source struct {
	index int
	name  string
	pool  *pgxpool.Pool
	br    breaker

	prepareMu    sync.Mutex
	prepareErr   error // of the last attempt, until one succeeds
	prepareStart time.Time
	prepared     atomic.Bool
	probing      atomic.Bool
	// trusted: its schema shardid passed pgtrust.Check once.
	trusted atomic.Bool

	loads atomic.Uint64
}

func sourceName(pool *pgxpool.Pool, i int) string {
	if pool == nil {
		return fmt.Sprintf("source %d", i)
	}
	c := pool.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// errPreparing: some source's first attempt to prepare is still running,
// and has not run for firstPrepareWait yet; loads wait for it rather than
// fail (or create a tag's row without that source's highest id). After
// that they go on without the source, so that callers get an answer
// (503) rather than wait for a database being created or a lock.
var errPreparing = errors.New("a source is being prepared")

// firstPrepareWait is how long loads wait for a source's first prepare
// attempt: long enough for a database to be created on a busy server in
// the common case, short enough for a request to get its answer within
// the HTTP server's write timeout (10 s).
const firstPrepareWait = 8 * time.Second

// firstPrepare reports whether the source's first prepare attempt is
// still running and has run for less than wait.
func (s *source) firstPrepare(wait time.Duration) bool {
	if s.prepared.Load() {
		return false
	}
	s.prepareMu.Lock()
	defer s.prepareMu.Unlock()
	return s.prepareErr == nil && time.Since(s.prepareStart) < wait
}

// notPrepared is the reason a source is not used yet.
func (s *source) notPrepared() error {
	s.prepareMu.Lock()
	defer s.prepareMu.Unlock()
	if s.prepareErr != nil {
		return fmt.Errorf("not prepared yet: %w", s.prepareErr)
	}
	return fmt.Errorf("not prepared yet (its first attempt has run for %s)", time.Since(s.prepareStart).Round(time.Second))
}

// prepareSource runs the prepare hook for s until it succeeds, each
// attempt bounded by the prepare timeout: the first failure is logged at
// once, then a summary at most every sourceSummaryEvery.
func (a *Allocator) prepareSource(s *source) {
	defer a.wg.Done()
	start, lastLine, failed := time.Now(), time.Time{}, 0
	// Loads that stop waiting for the first attempt need a kick to
	// go on without the source.
	kick := time.AfterFunc(firstPrepareWait, a.kickAll)
	defer kick.Stop()
	for {
		ctx, cancel := context.WithTimeout(a.ctx, a.opts.prepTimeout)
		err := a.opts.prepare(ctx, s.index)
		cancel()
		if a.ctx.Err() != nil {
			return
		}
		if err == nil {
			s.prepareMu.Lock()
			s.prepareErr = nil
			s.prepareMu.Unlock()
			s.prepared.Store(true)
			a.opts.logger.Info("segment source ready", "source", s.name, "took", time.Since(start).Round(time.Millisecond))
			a.kickAll()
			return
		}
		err = fmt.Errorf("prepare: %w", err)
		s.prepareMu.Lock()
		first := s.prepareErr == nil
		s.prepareErr = err
		s.prepareMu.Unlock()
		if first {
			a.kickAll() // loads waiting for this attempt go on without the source
		}
		failed++
		if time.Since(lastLine) >= sourceSummaryEvery {
			a.opts.logger.Warn("segment source not ready; retrying in the background", "source", s.name,
				"failed_attempts", failed, "for", time.Since(start).Round(time.Second), "err", err)
			lastLine, failed = time.Now(), 0
		}
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(a.opts.probeEvery):
		}
	}
}

// take moves the tag's row forward by step ids of this source and returns
// the new segment. A missing row is created first (see createRow).
func (a *Allocator) take(ctx context.Context, s *source, tag string, step int64, stride int) (*segment, error) {
	if err := s.checkTrust(ctx); err != nil {
		return nil, err
	}
	var maxID int64
	err := s.pool.QueryRow(ctx, takeSQL, tag, step, stride, s.index).Scan(&maxID)
	if errors.Is(err, pgx.ErrNoRows) {
		// First use of the tag here, or a layout mismatch.
		if err := a.createRow(ctx, s, tag, step, stride); err != nil {
			return nil, err
		}
		err = s.pool.QueryRow(ctx, takeSQL, tag, step, stride, s.index).Scan(&maxID)
		if errors.Is(err, pgx.ErrNoRows) {
			le := &LayoutError{Source: s.name, Tag: tag, WantStride: stride, WantResidue: s.index}
			if err := s.pool.QueryRow(ctx, layoutSQL, tag).Scan(&le.GotStride, &le.GotResidue, &le.Fenced); err != nil {
				return nil, err
			}
			return nil, le
		}
	}
	if err != nil {
		return nil, err
	}
	return newSegment(maxID-step*int64(stride), int64(stride), step, s.index), nil
}

// createRow creates the tag's row on s, starting above every id any other
// source has handed out for the tag: on a fresh tag that changes nothing
// of substance, and on a source added to a running layout it keeps the
// new source from handing out ids an old one already did. So it needs
// every other source to answer; until they do, s cannot serve the tag.
func (a *Allocator) createRow(ctx context.Context, s *source, tag string, step int64, stride int) error {
	var floor int64
	for _, o := range a.sources {
		if o == s {
			continue
		}
		v, err := highest(ctx, o.pool, tag)
		if err != nil {
			return fmt.Errorf("create tag %s here needs the highest id of every other source; %s: %w", tag, o.name, err)
		}
		floor = max(floor, v)
	}
	start := alignUp(floor, int64(stride), int64(s.index))
	_, err := s.pool.Exec(ctx, createSQL, tag, step, stride, s.index, start)
	return err
}

// highest returns the tag's max_id on a source, 0 when it has no row or
// no table yet.
func highest(ctx context.Context, pool *pgxpool.Pool, tag string) (int64, error) {
	var v int64
	err := pool.QueryRow(ctx, highestSQL, tag).Scan(&v)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable:
		return 0, nil
	}
	return v, err
}

// alignUp returns the smallest v >= floor with v % stride == residue.
func alignUp(floor, stride, residue int64) int64 {
	r := ((floor-residue)%stride + stride) % stride
	v := floor - r
	if v < floor {
		v += stride
	}
	return v
}

func (s *source) ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// schema is where a source keeps its rows (migrations.Segment).
const schema = "shardid"

// checkTrust refuses, before the first write to s, a schema shardid that
// another role made or put anything in (pgtrust.Check): the allocator's
// writes would run that role's triggers as the allocator's role. Once it
// passed, only that schema's owner (the toolkit's role or a superuser) can
// put anything there.
func (s *source) checkTrust(ctx context.Context) error {
	if s.trusted.Load() {
		return nil
	}
	if err := pgtrust.Check(ctx, s.pool, schema); err != nil {
		return err
	}
	s.trusted.Store(true)
	return nil
}

// probe runs from a source's first failed call until it answers again:
// every interval it tries the source (half-open while the breaker is
// open) and, when it answers, closes the breaker and clears the count of
// consecutive failures.
func (a *Allocator) probe(s *source) {
	defer a.wg.Done()
	defer s.probing.Store(false)
	t := time.NewTicker(a.opts.probeEvery)
	defer t.Stop()
	// The probes' failures are not logged one by one (one a second for
	// as long as the source is down): a summary at most every
	// sourceSummaryEvery, and a line when the source is back.
	cutOff, lastLine, failed := time.Now(), time.Now(), 0
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		s.br.set(HalfOpen, a.opts.now(), nil)
		ctx, cancel := context.WithTimeout(a.ctx, a.opts.callTimeout)
		err := s.ping(ctx)
		cancel()
		if err == nil {
			s.br.success(a.opts.now())
			a.opts.logger.Info("segment source is back", "source", s.name, "cut_off_for", time.Since(cutOff).Round(time.Millisecond))
			a.kickAll()
			return
		}
		s.br.set(Open, a.opts.now(), err)
		failed++
		if time.Since(lastLine) >= sourceSummaryEvery {
			a.opts.logger.Warn("segment source still cut off", "source", s.name, "failed_probes", failed,
				"cut_off_for", time.Since(cutOff).Round(time.Second), "err", err)
			lastLine, failed = time.Now(), 0
		}
	}
}

// sourceSummaryEvery is how often, at most, a source that stays cut off
// gets a log line.
const sourceSummaryEvery = time.Minute

package segment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	layoutSQL = `SELECT stride, residue, fenced FROM shardid.segments WHERE tag = $1`
)

// source is one database handing out the ids congruent to index modulo
// the number of sources.
type source struct {
	index int
	name  string
	pool  *pgxpool.Pool
	br    breaker

	prepareMu sync.Mutex
	prepared  atomic.Bool
	probing   atomic.Bool

	loads    atomic.Uint64
	failures atomic.Uint64
}

func sourceName(pool *pgxpool.Pool, i int) string {
	if pool == nil {
		return fmt.Sprintf("source %d", i)
	}
	c := pool.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// prepare runs the caller's hook (typically the segment migrations) once
// per source before its first segment, retrying on later loads until it
// succeeds.
func (s *source) prepare(ctx context.Context, hook func(context.Context, int) error) error {
	if hook == nil || s.prepared.Load() {
		return nil
	}
	s.prepareMu.Lock()
	defer s.prepareMu.Unlock()
	if s.prepared.Load() {
		return nil
	}
	if err := hook(ctx, s.index); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	s.prepared.Store(true)
	return nil
}

// take moves the tag's row forward by step ids of this source and returns
// the new segment.
func (s *source) take(ctx context.Context, tag string, step int64, stride int) (*segment, error) {
	var maxID int64
	err := s.pool.QueryRow(ctx, takeSQL, tag, step, stride, s.index).Scan(&maxID)
	if errors.Is(err, pgx.ErrNoRows) {
		// First use of the tag here, or a layout mismatch.
		if _, err := s.pool.Exec(ctx, createSQL, tag, step, stride, s.index, int64(s.index)); err != nil {
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

func (s *source) ping(ctx context.Context, hook func(context.Context, int) error) error {
	if err := s.pool.Ping(ctx); err != nil {
		return err
	}
	return s.prepare(ctx, hook)
}

// probe runs while the breaker is open: every interval it tries the
// source (half-open) and closes the breaker when it answers.
func (a *Allocator) probe(s *source) {
	defer a.wg.Done()
	defer s.probing.Store(false)
	t := time.NewTicker(a.opts.probeEvery)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		s.br.set(HalfOpen, a.opts.now(), nil)
		ctx, cancel := context.WithTimeout(a.ctx, a.opts.callTimeout)
		err := s.ping(ctx, a.opts.prepare)
		cancel()
		if err == nil {
			s.br.success(a.opts.now())
			a.opts.logger.Info("segment source is back", "source", s.name)
			a.kickAll()
			return
		}
		s.br.set(Open, a.opts.now(), err)
	}
}

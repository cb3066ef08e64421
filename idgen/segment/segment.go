package segment

import "sync/atomic"

// segment is a range of ids held in memory: base + k*stride for k in
// 1..size. Callers claim positions with one atomic add on cursor; the
// other fields never change after the loader publishes the segment.
type segment struct {
	cursor    atomic.Int64 // next position to hand out, counted from 0
	triggered atomic.Bool  // the preload of the next segment was requested
	base      int64
	stride    int64
	size      int64
	preloadAt int64
	source    int
}

func newSegment(base, stride, size int64, source int) *segment {
	return &segment{base: base, stride: stride, size: size, preloadAt: size, source: source}
}

// id returns the id at position k (0-based).
func (s *segment) id(k int64) int64 { return s.base + (k+1)*s.stride }

// left returns how many positions are still unclaimed.
func (s *segment) left() int64 { return max(0, s.size-s.cursor.Load()) }

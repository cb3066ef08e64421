package segment_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardid/shardid/idgen/segment"
)

// Run with: go test -run '^$' -bench . ./idgen/segment
// The baseline is a bare atomic counter, the floor any in-memory
// allocator shares; the figures of docs/segments.md come from
// ./idgen/segment/httpapi (BenchmarkFigures).

func benchTag(b *testing.B, cfg segment.TagConfig) *segment.Tag {
	f := newFixture(b, 1)
	a := f.open(b, map[string]segment.TagConfig{"bench": cfg})
	return a.Tag("bench")
}

func BenchmarkBaselineAtomic(b *testing.B) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Add(1)
		}
	})
}

func BenchmarkNext(b *testing.B) {
	tag := benchTag(b, segment.TagConfig{MaxStep: 2_000_000})
	ctx := context.Background()
	for b.Loop() {
		if _, err := tag.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextParallel(b *testing.B) {
	tag := benchTag(b, segment.TagConfig{MaxStep: 2_000_000})
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := tag.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkNextNonConsecutive(b *testing.B) {
	tag := benchTag(b, segment.TagConfig{MaxStep: 2_000_000, MaxSkip: 16})
	ctx := context.Background()
	for b.Loop() {
		if _, err := tag.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFill1000(b *testing.B) {
	tag := benchTag(b, segment.TagConfig{MaxStep: 2_000_000})
	ctx := context.Background()
	ids := make([]int64, 1000)
	for b.Loop() {
		if _, err := tag.Fill(ctx, ids); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds()/1e6, "Mids/s")
}

func BenchmarkFormatAppend(b *testing.B) {
	f, err := segment.CompileFormat("ORD-{date}-{bucket:2}-{seq:10}")
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	now := time.Now()
	for b.Loop() {
		buf = f.Append(buf[:0], 12345, now, "user-42")
	}
}

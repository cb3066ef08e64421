package snowflake_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardid/shardid/idgen/snowflake"
)

// BenchmarkNextID measures ids per second from one generator shared by
// GOMAXPROCS goroutines (run with -cpu 2 for the figure in docs/schemes.md).
// Twitter's 12 sequence bits cap one worker at 4,096 ids per millisecond,
// so that case shows the layout's ceiling; the 16-bit sequence (41/0/6/16,
// 65,536 per millisecond) shows what the generator itself costs.
func BenchmarkNextID(b *testing.B) {
	for _, bc := range []struct {
		name string
		l    snowflake.Layout
	}{
		{"twitter-41-5-5-12", snowflake.Twitter},
		{"wide-seq-41-0-6-16", snowflake.Layout{TimeBits: 41, WorkerBits: 6, SeqBits: 16}},
		{"wide-seq-41-0-6-16-coarse-clock", snowflake.Layout{TimeBits: 41, WorkerBits: 6, SeqBits: 16}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := snowflake.Settings{Layout: bc.l}
			if strings.HasSuffix(bc.name, "coarse-clock") {
				s.Now = snowflake.CoarseNow
			}
			g, err := snowflake.New(s)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.NextID(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ids/s")
		})
	}
}

// BenchmarkNextIDs is NextID in batches of 64 (one clock read and one
// atomic step per batch), as `GET /v1/snowflake?count=64` takes them.
func BenchmarkNextIDs(b *testing.B) {
	for _, bc := range []struct {
		name string
		l    snowflake.Layout
	}{
		{"twitter-41-5-5-12", snowflake.Twitter},
		{"wide-seq-41-0-6-16", snowflake.Layout{TimeBits: 41, WorkerBits: 6, SeqBits: 16}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := snowflake.New(snowflake.Settings{Layout: bc.l})
			if err != nil {
				b.Fatal(err)
			}
			var total atomic.Int64
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]int64, 64)
				var mine int64
				for pb.Next() {
					n, err := g.NextIDs(buf)
					if err != nil {
						b.Error(err)
						return
					}
					mine += int64(n)
				}
				total.Add(mine)
			})
			b.ReportMetric(float64(total.Load())/time.Since(start).Seconds(), "ids/s")
		})
	}
}

// BenchmarkBaseline is what the generator's two steps cost on their own in
// the same run: reading the clock, and an atomic add on a counter shared by
// the goroutines. Absolute figures move with the machine's load; the ratio
// of BenchmarkNextID to these is what carries over.
func BenchmarkBaseline(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			var sink int64
			for pb.Next() {
				sink += time.Now().UnixMilli()
			}
			_ = sink
		})
	})
	b.Run("shared-atomic-add", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}

package rebalance

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

// BenchmarkMoveShard1M measures the figure of docs/rebalance.md: moving
// one shard of 1,000,000 rows (the sample likes table) from pg1 to an
// added host, online and offline, while two writers insert through the
// router into the moving shard and another, retrying refused writes. It
// reports the move's time, rows per second, how long the journal says
// writes were refused, and the longest run of refusals the writers saw.
//
//	go test ./shardmgr/rebalance -run '^$' -bench MoveShard1M -benchtime 1x -timeout 30m
func BenchmarkMoveShard1M(b *testing.B) {
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		b.Run(string(mode), func(b *testing.B) { benchMove(b, mode, 1_000_000) })
	}
}

// BenchmarkMoveShard1GB is the same online move for a shard of 1 GiB
// (12,600,000 rows of likes, table and indexes), the size the goal of
// refusing writes for under a second is set at.
//
//	go test ./shardmgr/rebalance -run '^$' -bench MoveShard1GB -benchtime 1x -timeout 60m
func BenchmarkMoveShard1GB(b *testing.B) { benchMove(b, MoveOnline, 12_600_000) }

func benchMove(b *testing.B, mode MoveMode, rows int) {
	var moveS, refusedMS, seenMS float64
	var moved, bytes int64
	for b.Loop() {
		cfg := moveCluster(b, 3)
		r := openRouter(b, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
		for left := rows; left > 0; left -= 1_000_000 {
			routeLikes(b, r, 0, min(left, 1_000_000))
		}

		stop := make(chan struct{})
		var refusals atomic.Int64
		var mu sync.Mutex
		var first, last time.Time
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					shard := []int{0, 1}[(w+i)%2]
					err := r.Tx(context.Background(), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
						_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES ($1, $2)`, s.Table("likes")), w, i)
						return err
					})
					if err != nil {
						refusals.Add(1)
						mu.Lock()
						if first.IsZero() {
							first = time.Now()
						}
						last = time.Now()
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
					}
				}
			})
		}
		// No per-phase log: a benchmark shows only its first lines, and
		// the summary below is the one that matters.
		res, err := MoveShard(context.Background(), clustertest.Handle(b, cfg), 0, "pg4", MoveOptions{Mode: mode, Migrations: sampleSet(b)})
		close(stop)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		moveS += res.Elapsed.Seconds()
		refusedMS += float64(res.Refused.Milliseconds())
		seenMS += float64(last.Sub(first).Milliseconds())
		moved += res.Rows
		bytes += res.Bytes
		b.Logf("%s: %d rows (%s) in %.1fs, refused %d ms (writers: %d refusals over %d ms)",
			mode, res.Rows, byteCount(res.Bytes), res.Elapsed.Seconds(), res.Refused.Milliseconds(), refusals.Load(), last.Sub(first).Milliseconds())
	}
	n := float64(b.N)
	b.ReportMetric(moveS/n, "move-s")
	b.ReportMetric(float64(moved)/moveS, "rows/s")
	b.ReportMetric(refusedMS/n, "refused-ms")
	b.ReportMetric(seenMS/n, "writers-refused-ms")
	b.ReportMetric(float64(bytes)/n/(1<<20), "MiB")
}

// BenchmarkRebalance64 measures the other figure of docs/rebalance.md:
// 64 shards of 10,000 rows each on three hosts, a fourth added, then
// shardid rebalance apply with --parallel 4 (16 online moves): with the
// added host's wal_retrieve_retry_interval at 100ms and at PostgreSQL's
// default of 5s, which paces the start of subscription workers.
//
//	go test ./shardmgr/rebalance -run '^$' -bench Rebalance64 -benchtime 1x -timeout 30m
func BenchmarkRebalance64(b *testing.B) {
	for _, retry := range []string{"100ms", "5s"} {
		b.Run("retry="+retry, func(b *testing.B) {
			const shards, rows = 64, 10_000
			var applyS, worstMS, moves float64
			for b.Loop() {
				cfg := moveClusterRetry(b, shards, retry)
				r := openRouter(b, cfg)
				var wg sync.WaitGroup
				for s := range shards {
					wg.Go(func() { routeLikes(b, r, s, rows) })
				}
				wg.Wait()
				t0 := time.Now()
				res, err := Apply(context.Background(), clustertest.Handle(b, cfg), ApplyOptions{Parallel: 4, Move: MoveOptions{Migrations: sampleSet(b)}})
				if err != nil {
					b.Fatal(err)
				}
				applyS += time.Since(t0).Seconds()
				moves += float64(len(res.Moves))
				var worst int64
				for _, m := range res.Moves {
					worst = max(worst, m.Refused.Milliseconds())
				}
				worstMS += float64(worst)
				rep, err := verify.Verify(context.Background(), clustertest.Handle(b, cfg), verify.Options{})
				if err != nil || !rep.OK {
					b.Fatal(err, rep.Problems)
				}
				b.Logf("retry %s: %d moves in %.1fs, writes refused at most %d ms per shard", retry, len(res.Moves), time.Since(t0).Seconds(), worst)
			}
			n := float64(b.N)
			b.ReportMetric(applyS/n, "apply-s")
			b.ReportMetric(moves/n, "moves")
			b.ReportMetric(worstMS/n, "max-refused-ms")
		})
	}
}

func byteCount(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

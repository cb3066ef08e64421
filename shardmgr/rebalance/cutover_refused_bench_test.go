package rebalance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// BenchmarkMoveRefusedSeen sets side by side, for an online move of a
// shard of 100,000 rows, the refused window the move reports (REFUSED,
// from the journal) and the longest refusal writers through a router with
// its defaults saw: four writers insert into the moving shard with Tx and
// no WithRetryMoving, trying again 2 ms after each refusal. A writer's
// refusal is counted two ways: refused, from the return of its first
// refused call to the start of its next accepted one (only refusals came
// back meanwhile); and waited, from the start of that refused call (which
// may have waited for the fence's locks) to the return of the accepted
// one (which may have waited for the target's opening).
//
//	go test ./shardmgr/rebalance -run '^$' -bench MoveRefusedSeen -benchtime 3x -timeout 30m -v
func BenchmarkMoveRefusedSeen(b *testing.B) {
	var reported, seen, waits []time.Duration
	for b.Loop() {
		cfg := moveCluster(b, 3)
		r := openRouter(b, cfg)
		const shard = 0
		routeLikes(b, r, shard, 100_000)

		stop := make(chan struct{})
		var mu sync.Mutex
		var longest, waited time.Duration
		var refusals int
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				var since, first time.Time // the refused streak's first call: start and return (zero: none)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					err := r.Tx(context.Background(), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
						_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES ($1, $2)`, s.Table("likes")), w, i)
						return err
					})
					if err != nil {
						if since.IsZero() {
							since, first = start, time.Now()
						}
						mu.Lock()
						refusals++
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
						continue
					}
					if !since.IsZero() {
						mu.Lock()
						longest = max(longest, start.Sub(first))
						waited = max(waited, time.Since(since))
						mu.Unlock()
						since = time.Time{}
					}
				}
			})
		}
		time.Sleep(500 * time.Millisecond) // the writers under way
		res, err := MoveShard(context.Background(), clustertest.Handle(b, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(b)})
		time.Sleep(2 * time.Second) // every writer through again
		close(stop)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		reported = append(reported, res.Refused)
		seen = append(seen, longest)
		waits = append(waits, waited)
		b.Logf("online move of %d rows in %s: REFUSED %s; writers: longest refusal %s, longest wait %s (%d refused calls)",
			res.Rows, res.Elapsed.Round(time.Millisecond), res.Refused, longest.Round(time.Millisecond), waited.Round(time.Millisecond), refusals)
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Milliseconds())
	}
	b.ReportMetric(median(reported), "refused-ms")
	b.ReportMetric(median(seen), "writers-refused-ms")
	b.ReportMetric(median(waits), "writers-waited-ms")
}

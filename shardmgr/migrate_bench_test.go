package shardmgr

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// BenchmarkMigrate1024Shards is the figure harness of docs/migrations.md:
// `migrate up` of one table-creating migration, then of an index on a
// populated table, on 1024 shards over the three local servers, with 1, 2,
// 4 and 8 connections per host side by side in one run. Each iteration
// migrates up (timed, reported as s/up) and back down (not timed).
//
//	go test ./shardmgr -run '^$' -bench Migrate1024 -benchtime 3x
func BenchmarkMigrate1024Shards(b *testing.B) {
	const shards, rowsPerShard = 1024, 1000
	cfg := initCluster(b, shards)
	set := sampleSet(b)
	workers := []int{1, 2, 4, 8}

	run := func(b *testing.B, w, up, down int) {
		var total time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			_, err := Migrate(ctx(b), cfg, set, MigrateOptions{To: up, Workers: w})
			total += time.Since(start)
			n++
			require.NoError(b, err)
			_, err = Migrate(ctx(b), cfg, set, MigrateOptions{Direction: Down, To: down, Workers: 8})
			require.NoError(b, err)
		}
		b.ReportMetric(total.Seconds()/float64(n), "s/up")
		b.ReportMetric(float64(shards)*float64(n)/total.Seconds(), "shards/s")
	}
	for _, w := range workers {
		b.Run(fmt.Sprintf("create_table/workers=%d", w), func(b *testing.B) { run(b, w, 1, 0) })
	}

	// The index migration runs on tables of rowsPerShard rows each.
	_, err := Migrate(ctx(b), cfg, set, MigrateOptions{To: 1, Workers: 8})
	require.NoError(b, err)
	m := clusterMap(b, cfg)
	var wg sync.WaitGroup
	for _, h := range cfg.Hosts {
		wg.Go(func() {
			conn, err := pgx.Connect(context.Background(), h.DSN)
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Close(context.Background())
			for _, id := range m.ShardsOn(h.Name) {
				if _, err := conn.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s.likes (user_id, post_id)
					SELECT g %% 997, (g * 7919) %% 100003 FROM generate_series(1, %d) g; ANALYZE %s.likes`,
					m.Shards[id].Schema, rowsPerShard, m.Shards[id].Schema)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, w := range workers {
		b.Run(fmt.Sprintf("index_populated/workers=%d", w), func(b *testing.B) { run(b, w, 2, 1) })
	}
}

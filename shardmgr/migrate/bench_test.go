package migrate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// BenchmarkMigrate1024Shards is the figure harness of docs/migrations.md:
// `migrate up` of one table-creating migration, then of an index on a
// populated table, on 1024 shards over the three local servers, with 1, 2,
// 4 and 8 connections per host side by side in one run. Each iteration
// migrates up (timed, reported as s/up) and back down (not timed). The
// first run on a fresh cluster also creates every shard's version and
// failure tables; it is measured once, logged, and kept out of the
// comparison.
//
//	go test ./shardmgr/migrate -run '^$' -bench Migrate1024 -benchtime 3x
func BenchmarkMigrate1024Shards(b *testing.B) {
	const shards, rowsPerShard = 1024, 10_000
	cfg := installtest.Cluster(b, shards)
	set := sampleSet(b)
	workers := []int{1, 2, 4, 8}

	start := time.Now()
	_, err := migrate.Migrate(clustertest.Ctx(b), clustertest.Handle(b, cfg), set, migrate.Options{To: 1})
	require.NoError(b, err)
	b.Logf("first run (create table and each shard's version tables), %d workers per host: %.2fs", migrate.DefaultMigrateWorkers, time.Since(start).Seconds())
	_, err = migrate.Migrate(clustertest.Ctx(b), clustertest.Handle(b, cfg), set, migrate.Options{Direction: migrate.Down, To: 0, Workers: 8})
	require.NoError(b, err)

	run := func(b *testing.B, w, up, down int, only []int) {
		var total time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			res, err := migrate.Migrate(clustertest.Ctx(b), clustertest.Handle(b, cfg), set, migrate.Options{To: up, Workers: w, Shards: only})
			total += time.Since(start)
			n += len(res.Shards)
			require.NoError(b, err)
			_, err = migrate.Migrate(clustertest.Ctx(b), clustertest.Handle(b, cfg), set, migrate.Options{Direction: migrate.Down, To: down, Workers: 8, Shards: only})
			require.NoError(b, err)
		}
		b.ReportMetric(total.Seconds()/float64(b.N), "s/up")
		b.ReportMetric(float64(n)/total.Seconds(), "shards/s")
	}
	for _, w := range workers {
		b.Run(fmt.Sprintf("create_table/workers=%d", w), func(b *testing.B) { run(b, w, 1, 0, nil) })
	}
	// The same on the shards of one host alone, the other two idle: what
	// parallelism within a host gives when the host has the CPUs to itself.
	pg1 := clustertest.ClusterMap(b, cfg).ShardsOn("pg1")
	for _, w := range workers {
		b.Run(fmt.Sprintf("create_table_one_host/workers=%d", w), func(b *testing.B) { run(b, w, 1, 0, pg1) })
	}

	// The index migration runs on tables of rowsPerShard rows each.
	_, err = migrate.Migrate(clustertest.Ctx(b), clustertest.Handle(b, cfg), set, migrate.Options{To: 1, Workers: 8})
	require.NoError(b, err)
	m := clustertest.ClusterMap(b, cfg)
	start = time.Now()
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
	b.Logf("populated %d shards with %d rows each in %.1fs", shards, rowsPerShard, time.Since(start).Seconds())
	for _, w := range workers {
		b.Run(fmt.Sprintf("index_populated/workers=%d", w), func(b *testing.B) { run(b, w, 2, 1, nil) })
	}
}

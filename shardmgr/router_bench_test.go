package shardmgr_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// BenchmarkSingleInsert: a single-row INSERT into a shard's table (its id
// from the shard's DEFAULT), 8 writers at once, through the router with
// its defaults (Exec: one statement, no transaction; Tx: BEGIN, the
// statement, COMMIT) and through a bare pgxpool on the same database with
// pgxpool's defaults. Issue 29's goal: Exec >= 0.9x the bare pool's
// inserts per second.
//
//	go test -run '^$' -bench BenchmarkSingleInsert -benchtime 20000x -count 5 ./shardmgr/
func BenchmarkSingleInsert(b *testing.B) {
	cfg := initCluster(b, 2)
	_, err := migrate.Migrate(context.Background(), clustertest.Handle(b, cfg), sampleSet(b), migrate.Options{})
	require.NoError(b, err)
	r := openRouter(b, cfg)
	host := r.Map().Shards[0].Host
	h, ok := cfg.Host(host)
	require.True(b, ok)
	bare, err := pgxpool.New(context.Background(), h.DSN)
	require.NoError(b, err)
	b.Cleanup(bare.Close)
	const insert = `INSERT INTO shard_0000.likes (user_id, post_id) VALUES ($1, $2)`
	ctx := context.Background()
	run := func(b *testing.B, one func() error) {
		b.SetParallelism(4) // 4 x GOMAXPROCS (2 here): 8 writers
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := one(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("pgxpool.Exec", func(b *testing.B) {
		run(b, func() error { _, err := bare.Exec(ctx, insert, 1, 2); return err })
	})
	b.Run("router.Exec", func(b *testing.B) {
		run(b, func() error { _, err := r.Exec(ctx, 0, insert, 1, 2); return err })
	})
	b.Run("router.Tx", func(b *testing.B) {
		run(b, func() error {
			return r.Tx(ctx, 0, func(ctx context.Context, tx pgx.Tx, _ shardmgr.Shard) error {
				_, err := tx.Exec(ctx, insert, 1, 2)
				return err
			})
		})
	})
}

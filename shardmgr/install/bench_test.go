package install

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
	shsql "github.com/shardid/shardid/sql"
)

// BenchmarkCluster1024 measures the figures of docs/shardmgr.md on three
// local servers: init of 1024 shards on 3 hosts (fresh databases), a
// re-init that finds everything in place, verify and verify --deep on that
// cluster (every shard holding a table of 100 rows for the deep scan), and,
// side by side as the baseline, the same generator SQL executed shard after
// shard on one connection per host.
//
//	go test ./shardmgr/install -run '^$' -bench Cluster1024 -benchtime 3x
func BenchmarkCluster1024(b *testing.B) {
	const shards = 1024
	var initS, reinitS, serialS, verifyS, deepS time.Duration
	for b.Loop() {
		cfg := clustertest.Cluster(b, shards, false)
		t0 := time.Now()
		if _, err := Init(context.Background(), clustertest.Handle(b, cfg), InitOptions{}); err != nil {
			b.Fatal(err)
		}
		initS += time.Since(t0)

		t0 = time.Now()
		res, err := Init(context.Background(), clustertest.Handle(b, cfg), InitOptions{})
		if err != nil || res.Changed() {
			b.Fatal(err, res)
		}
		reinitS += time.Since(t0)

		serialS += serialInstall(b, shards)

		t0 = time.Now()
		rep, err := verify.Verify(context.Background(), clustertest.Handle(b, cfg), verify.Options{})
		if err != nil || !rep.OK {
			b.Fatal(err, rep.Problems)
		}
		verifyS += time.Since(t0)

		fillTables(b, cfg, 100)
		t0 = time.Now()
		rep, err = verify.Verify(context.Background(), clustertest.Handle(b, cfg), verify.Options{Deep: true})
		if err != nil || !rep.OK {
			b.Fatal(err, rep.Problems)
		}
		deepS += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(initS.Seconds()/n, "init-s")
	b.ReportMetric(reinitS.Seconds()/n, "reinit-s")
	b.ReportMetric(serialS.Seconds()/n, "serial-sql-s")
	b.ReportMetric(initS.Seconds()/serialS.Seconds(), "init/serial")
	b.ReportMetric(verifyS.Seconds()/n, "verify-s")
	b.ReportMetric(deepS.Seconds()/n, "verify-deep-s")
}

// serialInstall runs the rendered generator SQL of shards shards, spread
// over the three servers in fresh databases, one shard after another on
// one connection per server: the floor a hand-written script would reach.
func serialInstall(b *testing.B, shards int) time.Duration {
	cfg := clustertest.Cluster(b, shards, true)
	ctx := context.Background()
	conns := make([]*pgx.Conn, len(cfg.Hosts))
	for i, h := range cfg.Hosts {
		c, err := pgx.Connect(ctx, h.DSN)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		conns[i] = c
	}
	t0 := time.Now()
	for i, r := range balancedRanges(shards, len(conns)) {
		for id := r[0]; id < r[1]; id++ {
			ddl, err := shsql.Render(shsql.Params{Shard: id})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := conns[i].Exec(ctx, ddl); err != nil {
				b.Fatal(err)
			}
		}
	}
	return time.Since(t0)
}

func fillTables(b *testing.B, cfg *shardmgr.Config, rows int) {
	ctx := context.Background()
	r, err := shardmgr.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for id := range r.Shards() {
		err := r.Tx(ctx, id, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id bigint PRIMARY KEY DEFAULT %[2]s, n int);
				INSERT INTO %[1]s (n) SELECT g FROM generate_series(1, %[3]d) g`, s.Table("items"), s.NextID(), rows))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

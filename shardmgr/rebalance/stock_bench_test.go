package rebalance

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/charts"
	"github.com/shardid/shardid/internal/app/genbench"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/verify"
)

// stockSettings are PostgreSQL 15's defaults for what the throwaway
// servers of localpg change (but fsync and full_page_writes, which stay
// off on both sides of every comparison), and wal_level=logical, the one
// setting online moves need.
var stockSettings = map[string]string{
	"wal_level":                       "logical",
	"max_wal_senders":                 "10",
	"max_replication_slots":           "10",
	"max_logical_replication_workers": "4",
	"max_worker_processes":            "8",
	"max_connections":                 "100",
	"wal_retrieve_retry_interval":     "5s",
}

// tunedSettings are the figures' old servers: a 100ms launcher pause and
// 16 logical replication workers.
var tunedSettings = map[string]string{
	"wal_retrieve_retry_interval":     "100ms",
	"max_logical_replication_workers": "16",
	"max_worker_processes":            "24",
}

// ownCluster initialises shards logical shards on three servers of the
// benchmark's own, started with settings, migrates them with the sample
// migrations and adds a fourth such server as pg4 to the cluster file.
func ownCluster(b testing.TB, shards int, settings map[string]string) (*shardmgr.Config, []*localpg.Server) {
	b.Helper()
	var servers []*localpg.Server
	for range 4 {
		servers = append(servers, pgtest.Own(b, localpg.Options{Settings: settings}))
	}
	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("own%d", clustertest.DBCounter.Add(1)), Shards: shards, Path: "bench.yaml", Catalog: servers[0].DSN("catalog")}
	for i, s := range servers[:3] {
		cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: fmt.Sprintf("pg%d", i+1), DSN: s.DSN("app")})
	}
	require.NoError(b, cfg.ValidateCluster())
	_, err := install.Init(clustertest.Ctx(b), clustertest.Handle(b, cfg), install.InitOptions{})
	require.NoError(b, err)
	_, err = migrate.Migrate(clustertest.Ctx(b), clustertest.Handle(b, cfg), sampleSet(b), migrate.Options{})
	require.NoError(b, err)
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: servers[3].DSN("app")})
	require.NoError(b, cfg.ValidateCluster())
	applyHosts(b, cfg)
	return cfg, servers
}

// BenchmarkRebalanceStock is the first figure of docs/rebalance.md: 64
// shards of 1,000 rows on three hosts, a fourth added, then rebalance
// apply --parallel 4 (16 online moves), on servers with PostgreSQL's
// default settings but wal_level=logical (4 logical replication workers,
// a 5s launcher pause) against servers tuned as the old figures' were
// (100ms, 16 workers), side by side. It reports both times and their
// ratio (goal: stock within 1.5x of tuned).
//
//	go test ./shardmgr/rebalance -run '^$' -bench RebalanceStock -benchtime 1x -timeout 30m
func BenchmarkRebalanceStock(b *testing.B) {
	const shards, rows = 64, 1_000
	run := func(settings map[string]string, name string) float64 {
		all := map[string]string{}
		for k, v := range stockSettings {
			all[k] = v
		}
		for k, v := range settings {
			all[k] = v
		}
		cfg, _ := ownCluster(b, shards, all)
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
		took := time.Since(t0).Seconds()
		var worst int64
		for _, m := range res.Moves {
			worst = max(worst, m.Refused.Milliseconds())
		}
		rep, err := verify.Verify(context.Background(), clustertest.Handle(b, cfg), verify.Options{})
		if err != nil || !rep.OK {
			b.Fatal(err, rep.Problems)
		}
		b.Logf("%s: %d moves in %.1fs, writes refused at most %d ms per shard", name, len(res.Moves), took, worst)
		return took
	}
	var stockS, tunedS float64
	for b.Loop() {
		tunedS += run(tunedSettings, "tuned (100ms, 16 workers)")
		stockS += run(nil, "stock (5s, 4 workers)")
	}
	n := float64(b.N)
	b.ReportMetric(stockS/n, "stock-s")
	b.ReportMetric(tunedS/n, "tuned-s")
	b.ReportMetric(stockS/tunedS, "stock/tuned")
}

// phaseClock records when each phase of a move started, from its
// progress.
type phaseClock struct {
	mu   sync.Mutex
	seen []Phase
	at   []time.Time
}

func (c *phaseClock) progress(p MoveProgress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 || c.seen[len(c.seen)-1] != p.Phase {
		c.seen, c.at = append(c.seen, p.Phase), append(c.at, time.Now())
	}
}

// Bars are each phase's share of the move in seconds, in the order the
// move went through them: its timeline.
func (c *phaseClock) Bars(end time.Time) []charts.Bar {
	var bars []charts.Bar
	for i, p := range c.seen {
		next := end
		if i+1 < len(c.at) {
			next = c.at[i+1]
		}
		bars = append(bars, charts.Bar{Label: string(p), Value: next.Sub(c.at[i]).Seconds()})
	}
	return bars
}

// moveSVG, when set, is where benchMoveVsRaw draws its last round: the
// move against the raw pipeline, the move's phases in order, and how long
// writes were refused (docs/img/move-timeline.svg).
var moveSVG = flag.String("move-svg", "", "draw the last move-vs-raw round as an SVG chart into this file")

func drawMove(b *testing.B, server string, raw, rawCopy, rawIndex float64, res *MoveResult, phases []charts.Bar) {
	f, err := os.Create(*moveSVG)
	require.NoError(b, err)
	defer f.Close()
	secs := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	caption := []string{fmt.Sprintf("PostgreSQL %s, one shard of %d rows, %.1f GiB, online move", server, res.Rows, float64(res.Bytes)/(1<<30)), genbench.Machine()}
	require.NoError(b, charts.WriteFigure(f, charts.Figure{Caption: caption, Panels: []charts.Panel{
		{Title: fmt.Sprintf("online move vs raw COPY, %d rows", res.Rows), YLabel: "seconds", Format: secs, Bars: []charts.Bar{
			{Label: "move", Value: res.Elapsed.Seconds()}, {Label: "raw", Value: raw}, {Label: "raw copy", Value: rawCopy}, {Label: "raw indexes", Value: rawIndex}}},
		{Title: "the move's phases, in order", YLabel: "seconds", Format: secs, Bars: phases},
		{Title: "writes refused", YLabel: "milliseconds", Format: func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, Bars: []charts.Bar{
			{Label: "refused", Value: float64(res.Refused.Milliseconds())}}},
	}}))
}

// String lists each phase's share of the move: "schema 0.1s, copy 3.2s, ...".
func (c *phaseClock) String(end time.Time) string {
	var parts []string
	for i, p := range c.seen {
		next := end
		if i+1 < len(c.at) {
			next = c.at[i+1]
		}
		parts = append(parts, fmt.Sprintf("%s %.2fs", p, next.Sub(c.at[i]).Seconds()))
	}
	return strings.Join(parts, ", ")
}

// BenchmarkMoveVsRawCopy is the second figure of docs/rebalance.md: one
// shard of 2,000,000 rows (the sample likes table: a primary key and a
// secondary index) moved online from pg1 to pg4, against a raw pipeline
// between the same two servers: COPY ... TO STDOUT (FORMAT binary) piped
// into COPY ... FROM STDIN on a table without indexes, then the same
// primary key and CREATE INDEX. It reports both, their ratio (goal: the
// move within 1.5x of raw) and where the move's time went, per phase.
//
//	go test ./shardmgr/rebalance -run '^$' -bench 'MoveVsRawCopy$' -benchtime 1x -timeout 30m
func BenchmarkMoveVsRawCopy(b *testing.B) { benchMoveVsRaw(b, 2_000_000) }

// BenchmarkMoveVsRawCopy1GB is the same for a shard of 1 GiB (12,600,000
// rows of likes, table and indexes).
//
//	go test ./shardmgr/rebalance -run '^$' -bench MoveVsRawCopy1GB -benchtime 1x -timeout 60m
func BenchmarkMoveVsRawCopy1GB(b *testing.B) { benchMoveVsRaw(b, 12_600_000) }

func benchMoveVsRaw(b *testing.B, rows int) {
	var moveS, rawS, rawCopyS, rawIndexS float64
	for b.Loop() {
		cfg, _ := ownCluster(b, 3, stockSettings)
		r := openRouter(b, cfg)
		for left := rows; left > 0; left -= 1_000_000 {
			routeLikes(b, r, 0, min(left, 1_000_000))
		}
		// The new host registered (as the move would) so that its
		// database is there for the raw pipeline.
		_, err := install.Init(clustertest.Ctx(b), clustertest.Handle(b, cfg), install.InitOptions{})
		require.NoError(b, err)
		src, dst := clustertest.HostPool(b, cfg, "pg1"), clustertest.HostPool(b, cfg, "pg4")
		_, err = src.Exec(clustertest.Ctx(b), `VACUUM ANALYZE shard_0000.likes`)
		require.NoError(b, err)

		// The raw pipeline first, into a scratch database of the target's
		// server, then dropped.
		_, err = dst.Exec(clustertest.Ctx(b), `CREATE SCHEMA raw; CREATE TABLE raw.likes (id bigint NOT NULL, user_id bigint NOT NULL, post_id bigint NOT NULL, created_at timestamptz NOT NULL)`)
		require.NoError(b, err)
		sc, err := src.Acquire(clustertest.Ctx(b))
		require.NoError(b, err)
		dc, err := dst.Acquire(clustertest.Ctx(b))
		require.NoError(b, err)
		t0 := time.Now()
		n, err := pipeCopy(clustertest.Ctx(b), sc.Conn().PgConn(), dc.Conn().PgConn(),
			`COPY (SELECT id, user_id, post_id, created_at FROM ONLY shard_0000.likes) TO STDOUT (FORMAT binary)`,
			`COPY raw.likes (id, user_id, post_id, created_at) FROM STDIN (FORMAT binary)`, nil)
		require.NoError(b, err)
		require.EqualValues(b, rows, n)
		t1 := time.Now()
		_, err = dc.Exec(clustertest.Ctx(b), `ALTER TABLE raw.likes ADD PRIMARY KEY (id); CREATE INDEX ON raw.likes (post_id, created_at)`)
		require.NoError(b, err)
		t2 := time.Now()
		sc.Release()
		dc.Release()
		_, err = dst.Exec(clustertest.Ctx(b), `DROP SCHEMA raw CASCADE; CHECKPOINT`)
		require.NoError(b, err)

		clock := &phaseClock{}
		log := &benchLines{}
		res, err := MoveShard(context.Background(), clustertest.Handle(b, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(b), Progress: clock.progress, Logger: log.logger()})
		if err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		raw := t2.Sub(t0).Seconds()
		moveS += res.Elapsed.Seconds()
		rawS += raw
		rawCopyS += t1.Sub(t0).Seconds()
		rawIndexS += t2.Sub(t1).Seconds()
		if *moveSVG != "" {
			var server string
			require.NoError(b, src.QueryRow(clustertest.Ctx(b), `SHOW server_version`).Scan(&server))
			drawMove(b, server, raw, t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), res, clock.Bars(end))
		}
		b.Logf("raw: %.2fs (copy %.2fs, indexes %.2fs); move: %.2fs (%s), refused %d ms, %d rows (%s)",
			raw, t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), res.Elapsed.Seconds(), clock.String(end), res.Refused.Milliseconds(), res.Rows, byteCount(res.Bytes))
		for _, l := range log.lines {
			if !strings.Contains(l, "msg=move ") {
				b.Log(strings.TrimSpace(l))
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(moveS/n, "move-s")
	b.ReportMetric(rawS/n, "raw-s")
	b.ReportMetric(rawCopyS/n, "raw-copy-s")
	b.ReportMetric(rawIndexS/n, "raw-index-s")
	b.ReportMetric(moveS/rawS, "move/raw")
}

// benchLines keeps a move's log lines, to print the telling ones after
// the summary (a benchmark shows only its first lines).
type benchLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *benchLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *benchLines) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

package rebalance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// BenchmarkMoveVsPsqlPipe holds moves to issue 29's goals: one shard of
// 2,000,000 rows (the sample likes table: a primary key and a secondary
// index) moved online within 1.2x, offline within 1.3x, of a raw
// pipeline between the same two servers: psql's `\copy (SELECT ...) TO
// STDOUT (FORMAT binary)` piped into psql's `\copy ... FROM STDIN (FORMAT
// binary)` into a table without indexes, then the same primary key and
// CREATE INDEX, one after the other. The shard goes back and forth
// between pg1 and pg4, the raw pipeline just before each move and in its
// direction, one pair per round (-benchtime Nx: N rounds); it reports the
// medians, their ratio, the mover's CPU per move and the load average
// around the rounds.
//
//	go test ./shardmgr/rebalance -run '^$' -bench 'MoveVsPsqlPipe' -benchtime 3x -timeout 60m
func BenchmarkMoveVsPsqlPipe(b *testing.B) {
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		b.Run(string(mode), func(b *testing.B) { benchMoveVsPsql(b, mode, 2_000_000) })
	}
}

func benchMoveVsPsql(b *testing.B, mode MoveMode, rows int) {
	psql := pgtest.Psql(b)
	cfg, _ := ownCluster(b, 3, stockSettings)
	r := openRouter(b, cfg)
	for left := rows; left > 0; left -= 1_000_000 {
		routeLikes(b, r, 0, min(left, 1_000_000))
	}
	// The new host registered (as a move would) so that its database is
	// there for the raw pipeline.
	_, err := install.Init(clustertest.Ctx(b), clustertest.Handle(b, cfg), install.InitOptions{})
	require.NoError(b, err)
	home := clustertest.ClusterMap(b, cfg).Shards[0].Host
	_, err = clustertest.HostPool(b, cfg, home).Exec(clustertest.Ctx(b), `VACUUM ANALYZE shard_0000.likes`)
	require.NoError(b, err)
	dsn := func(host string) string {
		h, ok := cfg.Host(host)
		require.True(b, ok, host)
		return h.DSN
	}

	var moves, raws, cpus []float64
	var loads []string
	keep := time.Duration(0)
	for b.Loop() {
		to := map[bool]string{true: "pg4", false: "pg1"}[home != "pg4"]
		loads = append(loads, loadAverage())
		raw, rawCopy := psqlPipe(b, psql, dsn(home), dsn(to), clustertest.HostPool(b, cfg, to), rows)
		_, err = clustertest.HostPool(b, cfg, home).Exec(clustertest.Ctx(b), `CHECKPOINT`)
		require.NoError(b, err)

		clock := &phaseClock{}
		cpu0 := cpuTime()
		res, err := MoveShard(context.Background(), clustertest.Handle(b, cfg), 0, to, MoveOptions{Mode: mode, Migrations: sampleSet(b), Keep: &keep, Progress: clock.progress})
		if err != nil {
			b.Fatal(err)
		}
		cpu := (cpuTime() - cpu0).Seconds()
		end := time.Now()
		require.EqualValues(b, rows, res.Rows)
		moves, raws, cpus = append(moves, res.Elapsed.Seconds()), append(raws, raw), append(cpus, cpu)
		line := fmt.Sprintf("%s -> %s: raw %.2fs (copy %.2fs, indexes %.2fs); %s move %.2fs (%s), mover CPU %.2fs: %.2fx; load %s",
			home, to, raw, rawCopy, raw-rawCopy, mode, res.Elapsed.Seconds(), clock.String(end), cpu, res.Elapsed.Seconds()/raw, loads[len(loads)-1])
		b.Log(line)
		fmt.Fprintln(os.Stderr, line) // a round's figures survive a run cut short
		home = to
	}
	loads = append(loads, loadAverage())
	b.Logf("load average (1, 5, 15 min) before each round and at the end: %s", strings.Join(loads, " | "))
	b.ReportMetric(median(moves), "move-s")
	b.ReportMetric(median(raws), "raw-s")
	b.ReportMetric(median(moves)/median(raws), "move/raw")
	b.ReportMetric(median(cpus), "mover-cpu-s")
}

// psqlPipe copies the shard's likes from the server of src into a scratch
// schema on the server of dst with two psql processes piped together,
// builds the table's two indexes, drops the schema, and returns the time
// of the whole and of the copy alone.
func psqlPipe(b *testing.B, psql, src, dst string, dstPool *pgxpool.Pool, rows int) (total, copied float64) {
	b.Helper()
	ctx := clustertest.Ctx(b)
	_, err := dstPool.Exec(ctx, `CREATE SCHEMA raw; CREATE TABLE raw.likes (id bigint NOT NULL, user_id bigint NOT NULL, post_id bigint NOT NULL, created_at timestamptz NOT NULL)`)
	require.NoError(b, err)
	out := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", src,
		"-c", `\copy (SELECT id, user_id, post_id, created_at FROM ONLY shard_0000.likes) TO STDOUT (FORMAT binary)`)
	in := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dst,
		"-c", `\copy raw.likes (id, user_id, post_id, created_at) FROM STDIN (FORMAT binary)`)
	var outErr, inErr strings.Builder
	out.Stderr, in.Stderr = &outErr, &inErr
	pipe, err := out.StdoutPipe()
	require.NoError(b, err)
	in.Stdin = pipe
	t0 := time.Now()
	require.NoError(b, in.Start())
	require.NoError(b, out.Start())
	require.NoError(b, out.Wait(), outErr.String())
	require.NoError(b, in.Wait(), inErr.String())
	t1 := time.Now()
	_, err = dstPool.Exec(ctx, `ALTER TABLE raw.likes ADD PRIMARY KEY (id); CREATE INDEX ON raw.likes (post_id, created_at)`)
	require.NoError(b, err)
	t2 := time.Now()
	var n int64
	require.NoError(b, dstPool.QueryRow(ctx, `SELECT count(*) FROM raw.likes`).Scan(&n))
	require.EqualValues(b, rows, n)
	_, err = dstPool.Exec(ctx, `DROP SCHEMA raw CASCADE; CHECKPOINT`)
	require.NoError(b, err)
	return t2.Sub(t0).Seconds(), t1.Sub(t0).Seconds()
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes.
func loadAverage() string {
	buf, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(buf))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuTime is the CPU this process used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

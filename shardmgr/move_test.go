package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/stretchr/testify/require"
)

// moveCluster initialises shards logical shards on three hosts, migrates
// them with the sample migrations (a likes table) and adds a fourth host,
// pg4, to the cluster file only: the user's first step before a
// rebalance.
func moveCluster(t *testing.T, shards int) *Config {
	t.Helper()
	cfg := initCluster(t, shards)
	_, err := Migrate(ctx(t), cfg, sampleSet(t), MigrateOptions{})
	require.NoError(t, err)
	addHost(t, cfg, "pg4")
	return cfg
}

// addHost adds a host on the fourth shared server, with a database of
// this test's own, to cfg.
func addHost(t *testing.T, cfg *Config, name string) {
	t.Helper()
	s := pgtest.Servers(t, 4)[3]
	db := fmt.Sprintf("%s_%s", cfg.Cluster, name)
	dropLater(t, s, db)
	cfg.Hosts = append(cfg.Hosts, Host{Name: name, DSN: s.DSN(db)})
	require.NoError(t, cfg.ValidateCluster())
}

// routeLikes inserts n rows into shard's likes table through the router.
func routeLikes(t *testing.T, r *Router, shard, n int) {
	t.Helper()
	err := r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) SELECT g, g %% 100 FROM generate_series(1, $1) g`, s.Table("likes")), n)
		return err
	})
	require.NoError(t, err)
}

func openRouter(t *testing.T, cfg *Config, opts ...RouterOption) *Router {
	t.Helper()
	r, err := Open(ctx(t), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

// likeIDs reads shard's like ids from the host the catalog places it on.
func likeIDs(t *testing.T, cfg *Config, shard int) []int64 {
	t.Helper()
	m := clusterMap(t, cfg)
	p := hostPool(t, cfg, m.Shards[shard].Host)
	rows, err := p.Query(ctx(t), fmt.Sprintf(`SELECT id FROM %s ORDER BY id`, pgx.Identifier{m.Shards[shard].Schema, "likes"}.Sanitize()))
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

func requireVerifyOK(t *testing.T, cfg *Config) {
	t.Helper()
	rep, err := Verify(ctx(t), cfg, VerifyOptions{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify: %v", rep.Problems)
}

// replicationLeftovers counts publications, subscriptions and slots named
// like a move's on the cluster's hosts.
func replicationLeftovers(t *testing.T, cfg *Config, names ...string) int {
	t.Helper()
	n := 0
	for _, h := range cfg.Hosts {
		p := hostPool(t, cfg, h.Name)
		var c int
		require.NoError(t, p.QueryRow(ctx(t), `SELECT (SELECT count(*) FROM pg_publication WHERE pubname = ANY($1))
			+ (SELECT count(*) FROM pg_subscription WHERE subname = ANY($1))
			+ (SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY($1))
			+ (SELECT count(*) FROM pg_tables WHERE schemaname = 'shardid' AND tablename = ANY($1))`, names).Scan(&c))
		n += c
	}
	return n
}

func moveRecord(t *testing.T, cfg *Config, id int64) *MoveRecord {
	t.Helper()
	recs, err := readMoves(ctx(t), pool(t, cfg.Catalog), `id = $1`, id)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	return recs[0]
}

func TestMoveOfflineThenOnlineBack(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	r := openRouter(t, cfg, WithRefreshInterval(0))
	routeLikes(t, r, 1, 500)
	before := likeIDs(t, cfg, 1)

	res, err := MoveShard(ctx(t), cfg, 1, "pg4", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.EqualValues(t, 500, res.Rows)
	require.Equal(t, "shard_0001_moved_g"+fmt.Sprint(res.Generation), res.RetiredSchema)
	require.Equal(t, "pg4", clusterMap(t, cfg).Shards[1].Host)
	require.Equal(t, before, likeIDs(t, cfg, 1))
	requireVerifyOK(t, cfg)

	// The router follows the flip; new ids are above the old ones.
	routeLikes(t, r, 1, 10)
	after := likeIDs(t, cfg, 1)
	require.Len(t, after, 510)
	require.Greater(t, after[500], before[499])

	// The retired copy refuses writes and ids.
	src := hostPool(t, cfg, "pg1")
	retired := pgx.Identifier{res.RetiredSchema, "likes"}.Sanitize()
	_, err = src.Exec(ctx(t), fmt.Sprintf(`UPDATE %s SET post_id = 0`, retired))
	require.True(t, isFenceError(err), "%v", err)
	_, err = src.Exec(ctx(t), fmt.Sprintf(`INSERT INTO %s (id, user_id, post_id) VALUES (1, 1, 1)`, retired))
	require.True(t, isFenceError(err), "%v", err)
	_, err = src.Exec(ctx(t), fmt.Sprintf(`SELECT %s()`, pgx.Identifier{res.RetiredSchema, "next_id"}.Sanitize()))
	require.Error(t, err, "the retired generator hands out no id")

	// Back online: a move like any other.
	back, err := MoveShard(ctx(t), cfg, 1, "pg1", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, back.Phase)
	require.EqualValues(t, 510, back.Rows)
	require.Equal(t, after, likeIDs(t, cfg, 1))
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, back.ID).replName))
	requireVerifyOK(t, cfg)

	cl, err := Cleanup(ctx(t), cfg, CleanupOptions{All: true})
	require.NoError(t, err)
	require.Len(t, cl.Dropped, 2)
	requireVerifyOK(t, cfg)
}

var _ = errors.Is
var _ = time.Second
var _ *pgxpool.Pool

// writers insert rows through the router into shards, one row per
// transaction, until stop is closed. They retry writes refused with
// ErrShardMoving and record every id they were given.
type writers struct {
	mu       sync.Mutex
	ids      map[int64]int // id -> shard
	dups     []int64
	rows     map[int]int // shard -> rows committed
	refused  int
	first    time.Time // first and last refusal seen
	last     time.Time
	failures []error
}

func runWriters(t *testing.T, r *Router, shards []int, n int, stop <-chan struct{}) (*writers, *sync.WaitGroup) {
	w := &writers{ids: map[int64]int{}, rows: map[int]int{}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				shard := shards[(i+j)%len(shards)]
				var id int64
				err := r.Tx(context.Background(), shard, func(ctx context.Context, tx pgx.Tx, s Shard) error {
					return tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES ($1, $2) RETURNING id`, s.Table("likes")), i, j).Scan(&id)
				})
				w.mu.Lock()
				switch {
				case err == nil:
					if _, dup := w.ids[id]; dup {
						w.dups = append(w.dups, id)
					}
					w.ids[id] = shard
					w.rows[shard]++
				case errors.Is(err, ErrShardMoving):
					w.refused++
					if w.first.IsZero() {
						w.first = time.Now()
					}
					w.last = time.Now()
				default:
					w.failures = append(w.failures, err)
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	return w, &wg
}

func TestMoveOnlineUnderContinuousWrites(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	r := openRouter(t, cfg, WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, 2, 5000)
	before := likeIDs(t, cfg, 2)

	stop := make(chan struct{})
	w, wg := runWriters(t, r, []int{2, 2, 3, 4}, 6, stop)
	time.Sleep(300 * time.Millisecond)
	res, err := MoveShard(ctx(t), cfg, 2, "pg4", MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)

	require.Empty(t, w.failures, "writers saw only the typed refusal")
	require.Empty(t, w.dups, "no id repeated")
	require.Positive(t, w.rows[2])
	require.Positive(t, w.refused, "the cut-over refused some writes")
	t.Logf("moved %d rows; writes refused for %d ms (journal), writers saw refusals for %s (%d refusals); %d rows written meanwhile",
		res.Rows, res.RefusedMS, w.last.Sub(w.first).Round(time.Millisecond), w.refused, w.rows[2]+w.rows[3]+w.rows[4])
	require.Less(t, res.RefusedMS, int64(10000))

	// No row lost: every committed id is on the shard's new host, nothing else.
	got := likeIDs(t, cfg, 2)
	want := append([]int64(nil), before...)
	for id, s := range w.ids {
		if s == 2 {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	require.Equal(t, want, got)
	for _, s := range []int{3, 4} {
		require.Len(t, likeIDs(t, cfg, s), w.rows[s])
	}
	require.Equal(t, "pg4", clusterMap(t, cfg).Shards[2].Host)
	requireVerifyOK(t, cfg)
}

// testLogger logs through t.Log with timestamps.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

package rebalance

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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/verify"
)

// moveCluster initialises shards logical shards on three hosts, migrates
// them with the sample migrations (a likes table) and adds a fourth host,
// pg4, to the cluster file and applies it (init): the user's first steps
// before a rebalance.
func moveCluster(t testing.TB, shards int) *shardmgr.Config {
	cfg := moveClusterFileOnly(t, shards)
	applyHosts(t, cfg)
	return cfg
}

// moveClusterFileOnly is moveCluster with pg4 added to the cluster file
// only, not yet applied to the catalog.
func moveClusterFileOnly(t testing.TB, shards int) *shardmgr.Config {
	t.Helper()
	cfg := installtest.Cluster(t, shards)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	addHostToFile(t, cfg, "pg4", "100ms")
	return cfg
}

// moveClusterRetry is moveCluster with the added host's
// wal_retrieve_retry_interval set to retry.
func moveClusterRetry(t testing.TB, shards int, retry string) *shardmgr.Config {
	t.Helper()
	cfg := installtest.Cluster(t, shards)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	addHost(t, cfg, "pg4", retry)
	return cfg
}

// addHost adds a host on a server of this test's own to cfg and applies
// it to the catalog (init). With retry
// "100ms" the server starts subscription workers without PostgreSQL's
// default 5s pause between starts (wal_retrieve_retry_interval), which
// would otherwise pace a test's successive online moves.
func addHost(t testing.TB, cfg *shardmgr.Config, name, retry string) {
	t.Helper()
	addHostToFile(t, cfg, name, retry)
	applyHosts(t, cfg)
}

// addHostToFile is addHost without init: the host is in the file only.
func addHostToFile(t testing.TB, cfg *shardmgr.Config, name, retry string) {
	t.Helper()
	s := pgtest.Own(t, localpg.Options{Settings: map[string]string{"wal_retrieve_retry_interval": retry}})
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: name, DSN: s.DSN("app")})
	require.NoError(t, cfg.ValidateCluster())
}

func routeLikes(t testing.TB, r *shardmgr.Router, shard, n int) {
	clustertest.RouteLikes(t, r, shard, n)
}
func openRouter(t testing.TB, cfg *shardmgr.Config, opts ...shardmgr.RouterOption) *shardmgr.Router {
	return clustertest.OpenRouter(t, cfg, opts...)
}
func likeIDs(t testing.TB, cfg *shardmgr.Config, shard int) []int64 {
	return clustertest.LikeIDs(t, cfg, shard)
}

func requireVerifyOK(t testing.TB, cfg *shardmgr.Config) {
	t.Helper()
	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify: %v", rep.Problems)
}

// replicationLeftovers counts publications, subscriptions and slots named
// like a move's on the cluster's hosts.
func replicationLeftovers(t testing.TB, cfg *shardmgr.Config, names ...string) int {
	t.Helper()
	var tables, funcs []string
	for _, name := range names {
		tables = append(tables, name, name+"_delta")
		funcs = append(funcs, name+"_delta_rec", name+"_delta_txt")
	}
	n := 0
	for _, h := range cfg.Hosts {
		p := clustertest.HostPool(t, cfg, h.Name)
		var c int
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT (SELECT count(*) FROM pg_publication WHERE pubname = ANY($1))
			+ (SELECT count(*) FROM pg_subscription WHERE subname = ANY($1))
			+ (SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY($1))
			+ (SELECT count(*) FROM pg_tables WHERE schemaname = 'shardid' AND tablename = ANY($2))
			+ (SELECT count(*) FROM pg_proc WHERE proname = ANY($3))
			+ (SELECT count(*) FROM pg_trigger WHERE tgname IN ($4, $5))`, names, tables, funcs, deltaTrigger, deltaTruncate).Scan(&c))
		n += c
	}
	return n
}

func moveRecord(t testing.TB, cfg *shardmgr.Config, id int64) *MoveRecord {
	t.Helper()
	recs, err := readMoves(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog), `id = $1`, id)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	return recs[0]
}

func TestMoveOfflineThenOnlineBack(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 500)
	before := likeIDs(t, cfg, 1)

	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.EqualValues(t, 500, res.Rows)
	require.Equal(t, "shard_0001_moved_g"+fmt.Sprint(res.Generation), res.RetiredSchema)
	require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[1].Host)
	require.Equal(t, before, likeIDs(t, cfg, 1))
	requireVerifyOK(t, cfg)

	// The router follows the flip; new ids are above the old ones.
	routeLikes(t, r, 1, 10)
	after := likeIDs(t, cfg, 1)
	require.Len(t, after, 510)
	require.Greater(t, after[500], before[499])

	// The retired copy refuses writes and ids.
	src := clustertest.HostPool(t, cfg, "pg1")
	retired := pgx.Identifier{res.RetiredSchema, "likes"}.Sanitize()
	_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`UPDATE %s SET post_id = 0`, retired))
	require.True(t, fence.IsFenceError(err), "%v", err)
	_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s (id, user_id, post_id) VALUES (1, 1, 1)`, retired))
	require.True(t, fence.IsFenceError(err), "%v", err)
	_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`SELECT %s()`, pgx.Identifier{res.RetiredSchema, "next_id"}.Sanitize()))
	require.Error(t, err, "the retired generator hands out no id")

	// Back online: a move like any other.
	back, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg1", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, back.Phase)
	require.EqualValues(t, 510, back.Rows)
	require.Equal(t, after, likeIDs(t, cfg, 1))
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, back.ID).replName))
	requireVerifyOK(t, cfg)

	cl, err := Cleanup(clustertest.Ctx(t), clustertest.Handle(t, cfg), CleanupOptions{All: true})
	require.NoError(t, err)
	require.Len(t, cl.Dropped, 2)
	requireVerifyOK(t, cfg)
}

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

func runWriters(t *testing.T, r *shardmgr.Router, shards []int, n int, stop <-chan struct{}) (*writers, *sync.WaitGroup) {
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
				err := r.Tx(context.Background(), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
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
				case errors.Is(err, shardmgr.ErrShardMoving):
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
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, 2, 5000)
	before := likeIDs(t, cfg, 2)

	stop := make(chan struct{})
	w, wg := runWriters(t, r, []int{2, 2, 3, 4}, 6, stop)
	time.Sleep(300 * time.Millisecond)
	logs := &logLines{t: t}
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 2, "pg4", MoveOptions{Migrations: sampleSet(t), Logger: logs.logger()})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, "changes since the copy", logs.checkedFrom(), "checked under the fence from the change log, the copy by construction")

	require.Empty(t, w.failures, "writers saw only the typed refusal")
	require.Empty(t, w.dups, "no id repeated")
	require.Positive(t, w.rows[2])
	require.Positive(t, w.refused, "the cut-over refused some writes")
	t.Logf("moved %d rows; writes refused for %d ms (journal), writers saw refusals for %s (%d refusals); %d rows written meanwhile",
		res.Rows, res.Refused.Milliseconds(), w.last.Sub(w.first).Round(time.Millisecond), w.refused, w.rows[2]+w.rows[3]+w.rows[4])
	require.Less(t, res.Refused.Milliseconds(), int64(10000))

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
	require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[2].Host)
	requireVerifyOK(t, cfg)
}

// testLogger logs through t.Log with timestamps.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestMoveResumesAfterEachPhase interrupts a move right after each phase,
// as a crash there would, and runs it again: it finishes, with every row,
// and verify passes.
func TestMoveResumesAfterEachPhase(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 16)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	shard := 0
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		for _, phase := range steps(mode) {
			if phase == PhaseCleaned {
				continue
			}
			routeLikes(t, r, shard, 100)
			want := likeIDs(t, cfg, shard)
			from := clustertest.ClusterMap(t, cfg).Shards[shard].Host
			opts := MoveOptions{Mode: mode, Migrations: sampleSet(t), Keep: new(time.Duration), Logger: testLogger(t)}
			opts.stopAfter = phase
			res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
			require.ErrorIs(t, err, errStopped, "%s %s", mode, phase)
			require.Equal(t, phase, res.Phase)

			// While it is stopped the shard is where it was; after the
			// fence, writes are refused with the typed error.
			m := clustertest.ClusterMap(t, cfg)
			if phase.PastNoReturn() {
				require.Equal(t, "pg4", m.Shards[shard].Host)
			} else {
				require.Equal(t, from, m.Shards[shard].Host)
				if sourceFenced(mode, phase) {
					require.Equal(t, shardmgr.StateMoving, m.Shards[shard].State)
					err := r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error { return nil })
					require.ErrorIs(t, err, shardmgr.ErrShardMoving)
				}
			}

			opts.stopAfter = ""
			res, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
			require.NoError(t, err, "%s %s", mode, phase)
			require.Equal(t, PhaseCleaned, res.Phase)
			require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
			require.Equal(t, want, likeIDs(t, cfg, shard), "%s %s", mode, phase)
			routeLikes(t, r, shard, 1)
			require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, res.ID).replName))
			shard++
		}
	}
	requireVerifyOK(t, cfg)
}

func TestAbortMove(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	_, err := AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), nil)
	require.ErrorIs(t, err, ErrNoMove)

	for i, tc := range []struct {
		mode  MoveMode
		phase Phase
	}{{MoveOnline, PhaseCopy}, {MoveOnline, PhaseFenced}, {MoveOnline, PhaseVerified}, {MoveOffline, PhaseCopy}} {
		shard := i
		routeLikes(t, r, shard, 50)
		want := likeIDs(t, cfg, shard)
		before := clustertest.ClusterMap(t, cfg).Shards[shard]
		opts := MoveOptions{Mode: tc.mode, Migrations: sampleSet(t)}
		opts.stopAfter = tc.phase
		res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
		require.ErrorIs(t, err, errStopped)

		ab, err := AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{shard})
		require.NoError(t, err)
		require.Equal(t, []AbortResult{{MoveRef: MoveRef{ID: res.ID, Shard: shard, From: before.Host, To: "pg4"}, Phase: tc.phase}}, ab)
		require.Equal(t, PhaseAborted, moveRecord(t, cfg, res.ID).Phase)
		after := clustertest.ClusterMap(t, cfg).Shards[shard]
		require.Equal(t, before.Host, after.Host)
		require.Equal(t, shardmgr.StateActive, after.State)
		require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, res.ID).replName))
		var has bool
		require.NoError(t, clustertest.HostPool(t, cfg, "pg4").QueryRow(clustertest.Ctx(t), `SELECT to_regnamespace($1) IS NOT NULL`, before.Schema).Scan(&has))
		require.False(t, has, "the target's partial copy is gone")
		// The source takes writes again, with its counter running.
		routeLikes(t, r, shard, 5)
		require.Len(t, likeIDs(t, cfg, shard), len(want)+5)
	}
	requireVerifyOK(t, cfg)

	// After the flip there is nothing to abort: the move finishes, and
	// moving back is a move like any other.
	opts := MoveOptions{Migrations: sampleSet(t)}
	opts.stopAfter = PhaseFlipped
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 5, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{5})
	require.ErrorIs(t, err, ErrMoveFlipped)
	opts.stopAfter = ""
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 5, "pg4", opts)
	require.NoError(t, err)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 5, "pg3", opts)
	require.NoError(t, err)
	requireVerifyOK(t, cfg)
}

// A cut-over that cannot finish in time lifts the fence: the source serves
// as before, and running the move again finishes it.
func TestMoveFailedCutoverLeavesSourceServing(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 200)
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t), CutoverTimeout: time.Nanosecond})
	require.Error(t, err)
	recs, err := Moves(clustertest.Ctx(t), clustertest.Handle(t, cfg), false)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, PhaseCatchup, recs[0].Phase)
	require.Contains(t, recs[0].Error, "phase verified")
	s := clustertest.ClusterMap(t, cfg).Shards[1]
	require.Equal(t, "pg2", s.Host)
	require.Equal(t, shardmgr.StateActive, s.State)
	routeLikes(t, r, 1, 10) // fence lifted, counter running

	// While another manager holds the move, neither a second run nor an
	// abort touches it.
	conn, err := pgx.Connect(clustertest.Ctx(t), cfg.Catalog)
	require.NoError(t, err)
	_, err = conn.Exec(clustertest.Ctx(t), `SELECT pg_advisory_lock($1, $2)`, moveLockClass, int32(recs[0].ID))
	require.NoError(t, err)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, ErrMoveBusy)
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{1})
	require.ErrorIs(t, err, ErrMoveBusy)
	// Released before the close: a closed session's locks go only when its
	// backend has exited, a moment after the client hung up.
	_, err = conn.Exec(clustertest.Ctx(t), `SELECT pg_advisory_unlock($1, $2)`, moveLockClass, int32(recs[0].ID))
	require.NoError(t, err)
	require.NoError(t, conn.Close(clustertest.Ctx(t)))

	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.EqualValues(t, 210, res.Rows)
	requireVerifyOK(t, cfg)
}

// The target's counter is carried past every id the source handed out,
// even when the source's counter ran three hours ahead of the target's
// clock: beyond the hour next_id_advance allows without force, which the
// mover passes because its floor comes from real ids.
func TestMoveCarriesCounterAheadOfTargetClock(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	m := clustertest.ClusterMap(t, cfg)
	src := clustertest.HostPool(t, cfg, m.Shards[2].Host)
	ahead := shardschema.IDOfCounter(m.Layout, (time.Now().Add(3*time.Hour).UnixMilli()-m.Layout.Epoch)<<m.Layout.Resolved().SeqBits, 2)
	_, err := src.Exec(clustertest.Ctx(t), `SELECT shard_0002.next_id_advance($1, force => true)`, ahead)
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 2, 100)
	old := likeIDs(t, cfg, 2)
	require.Greater(t, old[0], ahead)
	// One more id drawn from the source's counter and never stored: the
	// target must not hand it out either.
	var drawn int64
	require.NoError(t, src.QueryRow(clustertest.Ctx(t), `SELECT shard_0002.next_id()`).Scan(&drawn))

	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		to := "pg4"
		if mode == MoveOffline {
			to = "pg1"
		}
		_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 2, to, MoveOptions{Mode: mode, Migrations: sampleSet(t)})
		require.NoError(t, err)
		routeLikes(t, r, 2, 100)
		ids := likeIDs(t, cfg, 2)
		require.Len(t, ids, len(old)+100)
		for _, id := range ids[len(old):] {
			require.Greater(t, id, drawn, "%s: the target's clock is hours behind the ids", mode)
		}
		old = ids
		drawn = ids[len(ids)-1]
	}
	// verify agrees, and notes the generator's ids running hours ahead of
	// the clock, which is what this test made them do.
	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{Deep: true})
	require.NoError(t, err)
	for _, p := range rep.Problems {
		require.Equal(t, verify.CheckGeneratorID, p.Check, "%v", p)
		require.Equal(t, 2, p.Shard)
	}
	require.True(t, rep.OK, "%v", rep.Problems)
	require.Len(t, rep.Notes, 1)
	require.Equal(t, verify.CheckGeneratorID, rep.Notes[0].Check)
	require.Equal(t, 2, rep.Notes[0].Shard)
}

// A table without a primary key cannot follow changes online, and a table
// the migrations did not make cannot be built on the target: both are
// refused before anything is journaled, and offline moves the first.
func TestMoveRefusesWhatItCannotCopy(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	set := setOf(t, map[string]string{"001_log.sql": `CREATE TABLE {{.schema}}.log (id bigint NOT NULL DEFAULT {{.next_id}}, msg text);`})
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	addHost(t, cfg, "pg4", "100ms")
	src := clustertest.HostPool(t, cfg, "pg1")
	_, err = src.Exec(clustertest.Ctx(t), `INSERT INTO shard_0000.log (msg) SELECT 'm' || g FROM generate_series(1, 300) g`)
	require.NoError(t, err)

	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: set})
	require.ErrorContains(t, err, "without a primary key or replica identity")
	// The advice to move it offline is the CLI's (cmd/shardid hint_test.go).
	require.ErrorIs(t, err, ErrNoReplicaIdentity)
	s := clustertest.ClusterMap(t, cfg).Shards[0]
	require.Equal(t, shardmgr.StateActive, s.State)
	// The preflight refused it before the move was journaled: nothing to
	// abort.
	require.ErrorIs(t, err, ErrPreflight)
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{0})
	require.ErrorIs(t, err, ErrNoMove)

	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: set, Mode: MoveOffline})
	require.NoError(t, err)
	require.EqualValues(t, 300, res.Rows)

	// A table made by hand on shard 1.
	_, err = clustertest.HostPool(t, cfg, "pg2").Exec(clustertest.Ctx(t), `CREATE TABLE shard_0001.extra (id bigint PRIMARY KEY)`)
	require.NoError(t, err)
	// The preflight refuses it before the move is journaled.
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: set, Mode: MoveOffline})
	require.ErrorIs(t, err, ErrPreflight)
	require.ErrorIs(t, err, ErrShardTables)
	require.ErrorContains(t, err, "extra")
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), nil)
	require.ErrorIs(t, err, ErrNoMove)

	// Without the migrations directory a migrated shard cannot be built:
	// refused by the preflight too.
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 2, "pg4", MoveOptions{Mode: MoveOffline})
	require.ErrorIs(t, err, ErrPreflight)
	require.ErrorIs(t, err, ErrMigrationsNeeded)
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), nil)
	require.ErrorIs(t, err, ErrNoMove)
	_, err = clustertest.HostPool(t, cfg, "pg2").Exec(clustertest.Ctx(t), `DROP TABLE shard_0001.extra`)
	require.NoError(t, err)
	requireVerifyOK(t, cfg)
}

// Two hosts may be two databases of one server: the online move creates
// the replication slot itself, as CREATE SUBSCRIPTION would wait forever.
func TestMoveOnlineWithinOneServer(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	s := pgtest.Servers(t, 1)[0] // pg1's server
	db := cfg.Cluster + "_pg4"
	clustertest.DropLater(t, s, db)
	cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: "pg4", DSN: s.DSN(db)})
	applyHosts(t, cfg)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 0, 100)
	want := likeIDs(t, cfg, 0)
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t), CutoverTimeout: time.Minute})
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Rows)
	require.Equal(t, want, likeIDs(t, cfg, 0))
	requireVerifyOK(t, cfg)
}

// logLines is a logger for a move that keeps its lines, and logs them
// through t too.
type logLines struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	return len(p), nil
}

func (l *logLines) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// checkedFrom is how the move's copy was checked, from its "checked" line.
func (l *logLines) checkedFrom() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, "msg=checked") {
			_, from, _ := strings.Cut(line, `from="`)
			from, _, _ = strings.Cut(from, `"`)
			return from
		}
	}
	return ""
}

// An online move checks its copy before the fence; under the fence only
// the changes since. A target row that differs from the source's after
// the scans is still caught: the move stops before the flip, the source
// serves, and nothing of the check is left behind on either host.
func TestMoveCheckCatchesDivergenceAfterTheScans(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 300)
	m := clustertest.ClusterMap(t, cfg)
	opts := MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)}
	opts.afterScans = func(ctx context.Context, src, dst *pgxpool.Pool) error {
		// A change the source never made, as a faulty apply would store
		// it: past the target's fence (which replication bypasses).
		return pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL session_replication_role = replica;
				UPDATE %s SET post_id = post_id + 1 WHERE id = (SELECT min(id) FROM %[1]s)`, pgx.Identifier{m.Shards[1].Schema, "likes"}.Sanitize()))
			return err
		})
	}
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, ErrMoveCheck)
	require.ErrorContains(t, err, "likes: source 300 rows")
	s := clustertest.ClusterMap(t, cfg).Shards[1]
	require.Equal(t, "pg2", s.Host)
	require.Equal(t, shardmgr.StateActive, s.State)
	routeLikes(t, r, 1, 10) // the source takes writes again
	var triggers int
	require.NoError(t, clustertest.HostPool(t, cfg, "pg2").QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_trigger WHERE tgname IN ($1, $2)`, deltaTrigger, deltaTruncate).Scan(&triggers))
	require.Zero(t, triggers, "the source no longer logs its writes")

	ab, err := AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{1})
	require.NoError(t, err)
	require.Len(t, ab, 1)
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, ab[0].ID).replName))
	requireVerifyOK(t, cfg)
}

// The copy is checked by construction only in the run that made it (what
// it knows is held in memory): a move resumed after its copy scans both
// hosts before the fence, and the log is read from those scans on.
// Changes logged before the scans, written while the move was stopped,
// are in the scans, not counted twice.
func TestMoveResumedAfterItsCopyScansBeforeTheFence(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 300)
	opts := MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)}
	opts.stopAfter = PhaseCatchup
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	routeLikes(t, r, 1, 40) // logged and replicated while the move is stopped

	logs := &logLines{t: t}
	opts = MoveOptions{Migrations: sampleSet(t), Logger: logs.logger()}
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.NoError(t, err)
	require.EqualValues(t, 340, res.Rows)
	require.Equal(t, "changes since the scans", logs.checkedFrom())
	require.Len(t, likeIDs(t, cfg, 1), 340)
	requireVerifyOK(t, cfg)
}

// What the copy is checked by: the rows its snapshot saw on the source,
// and the changes both hosts logged since. A change written during the
// copy on the source is in both counts; one the target alone stored after
// its copy (as a faulty apply would, past its fence) is caught, though no
// table is scanned.
func TestMoveCheckByConstructionCatchesADivergence(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 300)
	m := clustertest.ClusterMap(t, cfg)
	likes := pgx.Identifier{m.Shards[1].Schema, "likes"}.Sanitize()
	src, dst := clustertest.HostPool(t, cfg, "pg2"), clustertest.HostPool(t, cfg, "pg4")
	var once sync.Once
	opts := MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)}
	opts.beforeSnapshot = func() {
		once.Do(func() { // after the slot's snapshot: only the log and the slot carry it
			_, err := src.Exec(context.Background(), `INSERT INTO `+likes+` (user_id, post_id) VALUES (7, 7), (8, 8); DELETE FROM `+likes+` WHERE id = (SELECT min(id) FROM `+likes+`)`)
			assert.NoError(t, err)
		})
	}
	opts.afterScans = func(ctx context.Context, _, _ *pgxpool.Pool) error {
		return pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica; DELETE FROM `+likes+` WHERE id = (SELECT max(id) FROM `+likes+`)`)
			return err
		})
	}
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.ErrorIs(t, err, ErrMoveCheck)
	require.ErrorContains(t, err, "likes: source 301 rows")
	require.ErrorContains(t, err, "target 300 rows")
	require.Equal(t, "pg2", clustertest.ClusterMap(t, cfg).Shards[1].Host)
	routeLikes(t, r, 1, 10) // the source takes writes again

	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{1})
	require.NoError(t, err)
	opts = MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)}
	opts.beforeSnapshot = func() {}
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.NoError(t, err)
	require.EqualValues(t, 311, res.Rows)
	requireVerifyOK(t, cfg)
}

// A TRUNCATE after the scans is not in the change log (row triggers do
// not see it): the move checks with full scans under the fence instead,
// and finishes with the rows written after it.
func TestMoveChecksFullAfterTruncate(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 300)
	m := clustertest.ClusterMap(t, cfg)
	logs := &logLines{t: t}
	opts := MoveOptions{Migrations: sampleSet(t), Logger: logs.logger()}
	opts.afterScans = func(ctx context.Context, src, dst *pgxpool.Pool) error {
		_, err := src.Exec(ctx, fmt.Sprintf(`TRUNCATE %s; INSERT INTO %[1]s (user_id, post_id) VALUES (1, 1), (2, 2)`, pgx.Identifier{m.Shards[1].Schema, "likes"}.Sanitize()))
		return err
	}
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Rows)
	require.Equal(t, "full scans", logs.checkedFrom())
	require.Len(t, likeIDs(t, cfg, 1), 2)
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, res.ID).replName))
	requireVerifyOK(t, cfg)

	// Without one, the check is the change log's.
	logs = &logLines{t: t}
	opts = MoveOptions{Migrations: sampleSet(t), Logger: logs.logger()}
	res, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg3", opts)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Rows)
	require.Equal(t, "changes since the copy", logs.checkedFrom())
}

// A table with a column type that has no hash function (json) is
// checksummed over its rows' text, with the settings that shape the text
// fixed: changes logged from a session with another TimeZone and
// DateStyle still add up to what a scan sees.
func TestMoveChecksTextHashedTablesFromTheLog(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	set := setOf(t, map[string]string{"001_docs.sql": `CREATE TABLE {{.schema}}.docs (
		id bigint PRIMARY KEY DEFAULT {{.next_id}}, body json NOT NULL, at timestamptz NOT NULL DEFAULT now(), price float8);`})
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	addHost(t, cfg, "pg4", "100ms")
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	docs := pgx.Identifier{clustertest.ClusterMap(t, cfg).Shards[1].Schema, "docs"}.Sanitize()
	require.NoError(t, r.Tx(clustertest.Ctx(t), 1, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+docs+` (body, price) SELECT json_build_object('n', g), g / 7.0 FROM generate_series(1, 200) g`)
		return err
	}))
	logs := &logLines{t: t}
	opts := MoveOptions{Migrations: set, Logger: logs.logger()}
	opts.afterScans = func(ctx context.Context, src, dst *pgxpool.Pool) error {
		return pgx.BeginFunc(ctx, src, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SET LOCAL TimeZone = 'America/New_York'; SET LOCAL DateStyle = 'SQL, DMY'; SET LOCAL extra_float_digits = 0;
				INSERT INTO `+docs+` (body, price) VALUES ('{"late": true}', 0.1), ('[1, 2]', 1e-7);
				UPDATE `+docs+` SET body = '{"changed": 1}', at = at - interval '1 day' WHERE id IN (SELECT id FROM `+docs+` ORDER BY id LIMIT 5);
				DELETE FROM `+docs+` WHERE id IN (SELECT id FROM `+docs+` ORDER BY id DESC LIMIT 3)`)
			return err
		})
	}
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", opts)
	require.NoError(t, err)
	require.EqualValues(t, 199, res.Rows)
	require.Equal(t, "changes since the copy", logs.checkedFrom())
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, res.ID).replName))
	requireVerifyOK(t, cfg)
}

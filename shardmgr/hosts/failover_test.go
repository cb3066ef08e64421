package hosts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/clusterfile"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

const failoverShards = 4

// failoverRig is one host with an asynchronous standby, a catalog on
// another server, a cluster file on disk and a router writing through it.
type failoverRig struct {
	t                *testing.T
	ctx              context.Context
	path             string
	cfg              *shardmgr.Config
	primary, standby *localpg.Server
	standbyDSN       string
	router           *shardmgr.Router
	schemas          []string
}

func newFailoverRig(t *testing.T, standbyClock time.Duration) *failoverRig {
	r := newHostRig(t)
	ctx, primary := r.ctx, r.primary
	var env []string
	var err error
	if standbyClock != 0 {
		env, err = localpg.FaketimeEnv(standbyClock)
		require.NoError(t, err)
	}
	r.standby, err = primary.NewAsyncStandby(ctx, env...)
	require.NoError(t, err)
	t.Cleanup(func() { r.standby.Stop() })
	r.standbyDSN = r.standby.DSN("app")
	require.NoError(t, primary.WaitReplayed(ctx, r.standby, 2*time.Minute))

	// The standby's clock is where the case puts it.
	var sNow time.Time
	require.NoError(t, clustertest.Pool(t, r.standbyDSN).QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&sNow))
	offset := time.Until(sNow)
	t.Logf("standby clock offset: %s", offset.Round(time.Millisecond))
	require.InDelta(t, standbyClock.Seconds(), offset.Seconds(), 10, "libfaketime did not set the standby's clock")

	r.router = clustertest.OpenRouter(t, r.cfg)
	return r
}

// newHostRig is the failover rig's host alone: its server (of its own),
// the catalog, the cluster file and an items table in every shard; no
// standby, no router yet.
func newHostRig(t *testing.T) *failoverRig {
	ctx := clustertest.Ctx(t)
	n := clustertest.DBCounter.Add(1)
	cat := pgtest.Servers(t, 1)[0]
	catDB := fmt.Sprintf("fo%d_catalog", n)
	_, err := cat.CreateDatabase(ctx, catDB)
	require.NoError(t, err)
	clustertest.DropLater(t, cat, catDB)
	primary := pgtest.Own(t, localpg.Options{})
	_, err = primary.CreateDatabase(ctx, "app")
	require.NoError(t, err)

	path := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "# the failover test's cluster\ncluster: fo%d\nshards: %d\ncatalog: %s\nhosts:\n  - name: pg1\n    dsn: %s  # the primary\n",
		n, failoverShards, cat.DSN(catDB), primary.DSN("app")), 0o600))
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	_, err = installInit(t, cfg)
	require.NoError(t, err)

	r := &failoverRig{t: t, ctx: ctx, path: path, cfg: cfg, primary: primary}
	pp := clustertest.Pool(t, primary.DSN("app"))
	m := clustertest.ClusterMap(t, cfg)
	for _, s := range m.Shards {
		r.schemas = append(r.schemas, s.Schema)
		_, err := pp.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY DEFAULT %s(), v int)`,
			pgx.Identifier{s.Schema, "items"}.Sanitize(), pgx.Identifier{s.Schema, "next_id"}.Sanitize()))
		require.NoError(t, err)
	}
	return r
}

// write inserts through the router from two writers for d and returns
// the acknowledged ids. Before the failover, failures are the test's;
// ok reports them so.
func (r *failoverRig) write(d time.Duration) []int64 {
	var (
		mu   sync.Mutex
		ids  []int64
		errs []error
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for w := range 2 {
		wg.Go(func() {
			for i := w; time.Now().Before(deadline); i += 2 {
				var id int64
				err := r.router.Tx(r.ctx, i%failoverShards, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					return tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (v) VALUES ($1) RETURNING id`, s.Table("items")), i).Scan(&id)
				})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					ids = append(ids, id)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	require.Empty(r.t, errs)
	return ids
}

// storedIDs reads every id in the items tables of the server at dsn.
func (r *failoverRig) storedIDs(dsn string) map[int64]bool {
	p := clustertest.Pool(r.t, dsn)
	out := map[int64]bool{}
	for _, s := range r.schemas {
		rows, err := p.Query(r.ctx, `SELECT id FROM `+pgx.Identifier{s, "items"}.Sanitize())
		require.NoError(r.t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(r.t, err)
		for _, id := range ids {
			out[id] = true
		}
	}
	return out
}

// nextIDs is, per shard, the id the promoted server's generator hands
// out next (its counter, or its clock when later: the pull-up).
func (r *failoverRig) nextIDs(m *shardmgr.ShardMap) (ids, counters []int64) {
	conn, err := pgx.Connect(r.ctx, r.standbyDSN)
	require.NoError(r.t, err)
	defer conn.Close(r.ctx)
	var nowMS int64
	require.NoError(r.t, conn.QueryRow(r.ctx, `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`).Scan(&nowMS))
	l := m.Layout.Resolved()
	for id, s := range r.schemas {
		c, err := nextCounter(r.ctx, conn, s)
		require.NoError(r.t, err)
		counters = append(counters, c)
		ids = append(ids, shardschema.IDOfCounter(l, max(c, (nowMS-l.Epoch)<<l.SeqBits), id))
	}
	return ids, counters
}

// TestFailoverNeverRepeatsAnID is issue 20's failover, for real: a host
// with an asynchronous standby made by pg_basebackup -R, writers inserting
// through the router, the primary's WAL sender stopped (SIGSTOP) so that
// the ids it acknowledges from then on never reach the standby, the
// primary killed with SIGKILL, the standby promoted, then `host failover`
// (or, in the last case, only a repointing by the cluster file and init),
// then writes again: through the router, and a bulk insert long enough to
// run the shard's counter through the range of the lost ids. With the
// command no acknowledged id repeats, whether the standby's clock is the
// primary's or 30 s behind it (libfaketime); without it and the clock
// behind, the promoted server hands the lost ids out again, and verify
// names the repair, after which nothing repeats.
func TestFailoverNeverRepeatsAnID(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clock   time.Duration
		command bool
	}{
		{"with the command", 0, true},
		{"with the command, standby clock 30s behind", -30 * time.Second, true},
		{"without the command, standby clock 30s behind", -30 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) { testFailover(t, tc.clock, tc.command) })
	}
}

func testFailover(t *testing.T, clock time.Duration, command bool) {
	r := newFailoverRig(t, clock)
	ctx := r.ctx
	m := clustertest.ClusterMap(t, r.cfg)
	l := m.Layout.Resolved()

	acked := r.write(2 * time.Second)
	require.NoError(t, r.primary.WaitReplayed(ctx, r.standby, 2*time.Minute))
	replicatedBefore := len(acked)
	_, err := r.primary.FreezeWALSenders(ctx)
	require.NoError(t, err)
	acked = append(acked, r.write(2*time.Second)...)
	r.primary.KillHard()
	require.NoError(t, r.standby.Promote(ctx, 2*time.Minute))

	replicated := r.storedIDs(r.standbyDSN)
	maxAcked := make([]int64, failoverShards)
	lostIn := make([][]int64, failoverShards) // each shard's lost ids, ascending
	lost := 0
	for _, id := range acked {
		s := shardschema.ShardOf(l, id)
		maxAcked[s] = max(maxAcked[s], id)
		if !replicated[id] {
			lost++
			lostIn[s] = append(lostIn[s], id)
		}
	}
	for _, ids := range lostIn {
		slices.Sort(ids)
	}
	counterOf := func(id int64) int64 { return id>>(l.ShardBits+l.SeqBits)<<l.SeqBits | id&(1<<l.SeqBits-1) }
	t.Logf("ids acknowledged: %d (%d before the WAL sender stopped), replicated: %d, lost with the old primary's unreplicated WAL: %d",
		len(acked), replicatedBefore, len(replicated), lost)
	require.Positive(t, lost, "the stopped WAL sender lost no acknowledged id: the scenario did not happen")

	// Before anything: where the promoted server's generators stand.
	next, counters := r.nextIDs(m)
	hazard := 0
	bulkShard, bulkN := -1, int64(0)
	for s := range failoverShards {
		if next[s] <= maxAcked[s] {
			hazard++
		}
		if len(lostIn[s]) == 0 {
			continue
		}
		// Rows enough for the counter, one value a row, to run from where
		// it stands through the shard's first 20 lost ids.
		c := counterOf(lostIn[s][min(len(lostIn[s]), 20)-1])
		if n := c - counters[s] + 1; n > 0 && (bulkShard < 0 || n < bulkN) {
			bulkShard, bulkN = s, n
		}
	}
	// The lost ids a counter running through the bulk's range hands out
	// again when nothing advanced it.
	inRange := 0
	if bulkShard >= 0 {
		for _, id := range lostIn[bulkShard] {
			if c := counterOf(id); c >= counters[bulkShard] && c < counters[bulkShard]+bulkN {
				inRange++
			}
		}
	}
	t.Logf("promoted server: %d of %d shards would hand out next an id at or below the largest acknowledged one", hazard, failoverShards)
	if clock < 0 {
		require.Positive(t, hazard, "with its clock behind, the promoted server's next ids lie below acknowledged ones")
	}
	require.GreaterOrEqual(t, bulkShard, 0)
	require.Less(t, bulkN, int64(3_000_000), "the gap to the first lost id is too wide for the bulk insert")

	if command {
		res, err := Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: r.standbyDSN})
		require.NoError(t, err)
		t.Logf("failover: bound %s (%s, margin %d ms), advanced %d ms, timeline %d -> %d, server clock behind %d ms",
			res.Bound.Format(time.RFC3339Nano), res.BoundSource, res.MarginMS, res.AdvancedMS, *res.RecordedTimeline, res.Timeline, res.ServerBehindMS)
		require.Greater(t, res.Timeline, *res.RecordedTimeline)
		require.Len(t, res.Shards, failoverShards)
		for _, a := range res.Shards {
			require.Greater(t, a.After, maxAcked[a.Shard], "shard %d: its next id is not past the acknowledged ones", a.Shard)
		}
		if clock < 0 {
			require.Greater(t, res.ServerBehindMS, -clock.Milliseconds()/2, "the command measured the standby's clock lag")
		}
		cfg, err := shardmgr.LoadConfig(r.path)
		require.NoError(t, err)
		h, _ := cfg.Host("pg1")
		require.Equal(t, r.standbyDSN, h.DSN, "the cluster file names the new server")
		file, err := os.ReadFile(r.path)
		require.NoError(t, err)
		require.Contains(t, string(file), "# the primary", "the cluster file keeps its comments")
		r.cfg = cfg
	} else {
		// Today's way: point the file at the new server and run init.
		edit, err := clusterfile.SetHost(r.path, "pg1", "dsn", r.standbyDSN, os.LookupEnv)
		require.NoError(t, err)
		require.NoError(t, edit.Write())
		cfg, err := shardmgr.LoadConfig(r.path)
		require.NoError(t, err)
		r.cfg = cfg
		res, err := install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
		require.NoError(t, err)
		require.Contains(t, strings.Join(res.Warnings, "\n"), "host pg1: its server is on timeline 2, the catalog recorded 1: a standby promoted without `shardid host failover`")
	}

	// Writes again: a bulk insert on the shard nearest its lost ids, then
	// the writers through the router, which follows the catalog.
	_, err = r.router.Reload(ctx)
	require.NoError(t, err)
	after := r.bulk(bulkShard, bulkN)
	after = append(after, r.write(time.Second)...)
	dups := 0
	ackedSet := map[int64]bool{}
	for _, id := range acked {
		ackedSet[id] = true
	}
	for _, id := range after {
		if ackedSet[id] {
			dups++
		}
	}
	t.Logf("after the failover: %d ids (%d from a bulk insert of shard %d, whose counter ran through %d lost ids), %d of them acknowledged before it (duplicates)",
		len(after), bulkN, bulkShard, inRange, dups)
	if command {
		require.Zero(t, dups, "an id acknowledged before the failover was handed out again")
		for _, id := range after {
			require.Greater(t, id, maxAcked[shardschema.ShardOf(l, id)])
		}
		return
	}
	require.Positive(t, inRange)
	require.GreaterOrEqual(t, dups, inRange, "without the command and with the standby's clock behind, every lost id the counter runs through comes back")

	// verify tells, and names the repair; the repair holds.
	rep, err := verify.Verify(ctx, clustertest.Handle(t, r.cfg), verify.Options{MaxClockSkew: time.Minute})
	require.NoError(t, err)
	probs := rep.Failed(verify.CheckFailover)
	require.Len(t, probs, 1, "%v", rep.Problems)
	require.Equal(t, "pg1", probs[0].Host)
	require.Equal(t, verify.FixFailover, probs[0].Fix)
	require.Contains(t, probs[0].Detail, "promoted without `shardid host failover`")
	res, err := Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: r.standbyDSN})
	require.NoError(t, err)
	t.Logf("repair: advanced %d ms (%s)", res.AdvancedMS, res.BoundSource)
	rep, err = verify.Verify(ctx, clustertest.Handle(t, r.cfg), verify.Options{MaxClockSkew: time.Minute})
	require.NoError(t, err)
	require.Empty(t, rep.Failed(verify.CheckFailover))
	later := r.write(time.Second)
	for _, id := range later {
		require.False(t, ackedSet[id] || slices.Contains(after, id), "id %d repeated after the repair", id)
	}
}

// bulk inserts n rows into shard's items table on the new server in one
// statement and returns their ids.
func (r *failoverRig) bulk(shard int, n int64) []int64 {
	p := clustertest.Pool(r.t, r.standbyDSN)
	rows, err := p.Query(r.ctx, fmt.Sprintf(`INSERT INTO %s (v) SELECT g FROM generate_series(1, $1) g RETURNING id`,
		pgx.Identifier{r.schemas[shard], "items"}.Sanitize()), n)
	require.NoError(r.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(r.t, err)
	return ids
}

func installInit(t *testing.T, cfg *shardmgr.Config) (*install.InitResult, error) {
	return install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
}

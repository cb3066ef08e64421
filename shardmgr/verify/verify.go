package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardid/shardid/shardmgr/internal/catalog"

	"github.com/shardid/shardid/shardmgr"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/shardmgr/internal/fence"
	"github.com/shardid/shardid/shardmgr/internal/pg"
	"github.com/shardid/shardid/shardmgr/internal/shardschema"
	shsql "github.com/shardid/shardid/sql"
	"golang.org/x/sync/errgroup"
)

// The checks Verify runs, as they appear in Problem.Check.
const (
	// CheckCatalog: the catalog is reachable, initialised and agrees with
	// the cluster file.
	CheckCatalog = "catalog"
	// CheckHost: the host is reachable and belongs to this cluster.
	CheckHost = "host"
	// CheckPlacement: every shard exists on exactly one host, its
	// catalog's; a copy anywhere else is found by scanning every host.
	CheckPlacement = "placement"
	// CheckHostRecord: each host's record of the shards it holds agrees
	// with the catalog.
	CheckHostRecord = "host-record"
	// CheckGenerator: the generator is present and its marker names the
	// expected variant, shard, epoch and layout.
	CheckGenerator = "generator"
	// CheckGeneratorID: calling the generator returns an id carrying its
	// own shard and a time, under the cluster's epoch, close to the host's
	// clock.
	CheckGeneratorID = "generator-id"
	// CheckSequence: the counter sequence exists and has settings that
	// cannot repeat values (CACHE 1, NO CYCLE, INCREMENT 1).
	CheckSequence = "sequence"
	// CheckCounter: the counter is ahead of every id already stored in
	// the shard's tables (columns whose DEFAULT is its generator).
	CheckCounter = "counter"
	// CheckLock: no idle session holds the generator's shared advisory
	// lock, no session blocks the generator with its exclusive lock, and no
	// call of the generator waits out verify's lock or statement timeout;
	// each names the session holding the lock.
	CheckLock = "lock"
	// CheckClock: each host's clock agrees with the manager's and the
	// others' within VerifyOptions.MaxClockSkew.
	CheckClock = "clock"
	// CheckProbe: ids drawn concurrently from every shard are unique
	// across the cluster.
	CheckProbe = "probe"
	// CheckStoredShard (deep): every stored id decodes to the shard it is
	// stored in.
	CheckStoredShard = "stored-shard"
	// CheckDuplicateID (deep): no stored id appears twice.
	CheckDuplicateID = "duplicate-id"
)

// VerifyOptions adjust Verify. The zero value is fine.
type VerifyOptions struct {
	// Deep reads every id stored in a column whose DEFAULT is a shard
	// generator (CheckStoredShard, CheckDuplicateID).
	Deep bool
	// MaxClockSkew is the largest clock difference tolerated between a
	// host and the manager or two hosts. Zero means one second.
	MaxClockSkew time.Duration
	// ProbeIDs is the number of ids the live probe draws from every shard,
	// in two concurrent sessions. Zero means 16.
	ProbeIDs int
	// Workers is the number of connections per host. Zero means 4.
	Workers int
	// Now is the manager's clock. Nil means time.Now.
	Now func() time.Time
	// LockTimeout bounds every wait of a verify statement for a lock, the
	// generator's advisory lock included: a generator call that waits
	// longer is reported (CheckLock) with the session holding the lock.
	// Zero means 2 s.
	LockTimeout time.Duration
	// StatementTimeout bounds every statement verify runs but the reads of
	// Deep. Zero means 30 s. Connecting is bounded by each DSN's
	// connect_timeout, 10 s when it has none.
	StatementTimeout time.Duration

	// hostClock, in tests, replaces a host's clock reading.
	hostClock func(host string, t time.Time) time.Time
	// afterScan, in tests, runs after the hosts are scanned, before the
	// shards are checked.
	afterScan func()
}

// Problem is one failed check. Shard is -1 when the problem is not about
// one shard (JSON null); Host is empty when not about one host.
type Problem struct {
	Check  string
	Shard  int
	Host   string
	Detail string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Check)
	if p.Shard >= 0 {
		fmt.Fprintf(&b, " shard %d", p.Shard)
	}
	if p.Host != "" {
		fmt.Fprintf(&b, " on %s", p.Host)
	}
	b.WriteString(": ")
	b.WriteString(p.Detail)
	return b.String()
}

// MarshalJSON writes {"check":"...","shard":N,"host":"...","detail":"..."}
// with "shard": null when the problem is not about one shard.
func (p Problem) MarshalJSON() ([]byte, error) {
	var shard *int
	if p.Shard >= 0 {
		shard = &p.Shard
	}
	return json.Marshal(struct {
		Check  string `json:"check"`
		Shard  *int   `json:"shard"`
		Host   string `json:"host"`
		Detail string `json:"detail"`
	}{p.Check, shard, p.Host, p.Detail})
}

// Report is the outcome of Verify. JSON: {"ok":bool,"problems":[...]},
// with "notes":[...] when there are notes.
type Report struct {
	OK       bool      `json:"ok"`
	Problems []Problem `json:"problems"`
	// Notes are findings that are no failure but worth knowing, such as a
	// counter advanced ahead of the clock.
	Notes []Problem `json:"notes,omitempty"`
	// Checks lists the checks that ran.
	Checks []string `json:"-"`
	// Shards and Hosts count what was verified.
	Shards, Hosts int `json:"-"`
	// ProbeIDs is how many ids the live probe drew.
	ProbeIDs int           `json:"-"`
	Elapsed  time.Duration `json:"-"`
}

// Failed returns the problems of one check.
func (r *Report) Failed(check string) []Problem {
	var out []Problem
	for _, p := range r.Problems {
		if p.Check == check {
			out = append(out, p)
		}
	}
	return out
}

// Verify checks the cluster described by cfg against its catalog and the
// catalog against the hosts, scanning every host for shard schemas and
// generators. Problems are returned in the Report; the error is for input
// that makes verifying impossible (an invalid cluster file, a cancelled
// context).
func Verify(ctx context.Context, cfg *shardmgr.Config, opts VerifyOptions) (*Report, error) {
	start := time.Now()
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	if opts.MaxClockSkew <= 0 {
		opts.MaxClockSkew = time.Second
	}
	if opts.ProbeIDs <= 0 {
		opts.ProbeIDs = 16
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = defaultVerifyLockTimeout
	}
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = defaultVerifyStatementTimeout
	}
	v := &verifier{cfg: cfg, opts: opts, rep: &Report{Problems: []Problem{}}}
	v.run(ctx)
	for _, h := range v.hosts {
		if h.pool != nil {
			h.pool.Close()
		}
		if h.deep != nil {
			h.deep.Close()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := v.rep
	for _, ps := range [][]Problem{r.Problems, r.Notes} {
		slices.SortStableFunc(ps, func(a, b Problem) int {
			return cmp.Or(cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.Host, b.Host),
				cmp.Compare(checkOrder(a.Check), checkOrder(b.Check)), cmp.Compare(a.Detail, b.Detail))
		})
	}
	r.OK = len(r.Problems) == 0
	r.Elapsed = time.Since(start)
	return r, nil
}

var allChecks = []string{CheckCatalog, CheckHost, CheckPlacement, CheckHostRecord, CheckGenerator, CheckGeneratorID,
	CheckSequence, CheckCounter, CheckLock, CheckClock, CheckProbe, CheckStoredShard, CheckDuplicateID}

func checkOrder(c string) int { return slices.Index(allChecks, c) }

type verifier struct {
	cfg   *shardmgr.Config
	opts  VerifyOptions
	m     *shardmgr.Map
	hosts map[string]*hostScan // by name: the file's hosts

	mu  sync.Mutex
	rep *Report
}

func (v *verifier) problem(check string, shard int, host, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rep.Problems = append(v.rep.Problems, Problem{Check: check, Shard: shard, Host: host, Detail: fmt.Sprintf(format, args...)})
}

// note records a finding that is no failure (Report.Notes).
func (v *verifier) note(check string, shard int, host, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rep.Notes = append(v.rep.Notes, Problem{Check: check, Shard: shard, Host: host, Detail: fmt.Sprintf(format, args...)})
}

// hostScan is what one host holds.
type hostScan struct {
	name string
	pool *pgxpool.Pool
	deep *pgxpool.Pool // for Deep's reads: no statement timeout
	ok   bool          // reachable and scanned

	infoCluster, infoHost string // shardid.host_info; empty when missing
	records               map[int]string
	schemas               map[string]bool   // shard_NNNN schemas
	generators            map[string]string // schema -> marker
	sequences             map[string]seqInfo
	columns               map[string][]shardschema.IDColumn // by generator schema
	retired               map[string]fence.RetiredCopy      // moved shards' old copies, by schema
	advancers             map[string][]advancer             // next_id_advance functions, by schema
	locks                 []lockHolder                      // generator locks held at locksAt
	locksAt               time.Time
	blocked               map[int]bool // shards whose generator a session blocks
	clockOffset           time.Duration
	clockErr              time.Duration // half the round trip
}

// advancer is a next_id_advance function found on a host.
type advancer struct {
	signature string // regprocedure text
	args      int
	public    bool // PUBLIC may execute it
}

type seqInfo struct {
	cache, increment int64
	cycle            bool
}

var shardSchemaRE = regexp.MustCompile(`^shard_([0-9]{4})$`)

func (v *verifier) run(ctx context.Context) {
	v.rep.Checks = []string{CheckCatalog, CheckHost, CheckPlacement, CheckHostRecord, CheckGenerator, CheckGeneratorID,
		CheckSequence, CheckCounter, CheckLock, CheckClock, CheckProbe}
	if v.opts.Deep {
		v.rep.Checks = append(v.rep.Checks, CheckStoredShard, CheckDuplicateID)
	}
	if !v.readCatalog(ctx) {
		return
	}
	v.rep.Shards, v.rep.Hosts = len(v.m.Shards), len(v.cfg.Hosts)

	v.hosts = map[string]*hostScan{}
	var wg sync.WaitGroup
	for _, h := range v.cfg.Hosts {
		hs := &hostScan{name: h.Name}
		v.hosts[h.Name] = hs
		wg.Go(func() { v.scanHost(ctx, h, hs) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	if v.opts.afterScan != nil {
		v.opts.afterScan()
	}
	v.checkClocks()
	v.checkPlacement()
	v.checkShards(ctx)
	if v.opts.Deep {
		v.checkStored(ctx)
	}
}

// readCatalog reads the map and compares it with the cluster file.
func (v *verifier) readCatalog(ctx context.Context) bool {
	pool, err := openVerifyPool(ctx, v.cfg.Catalog, 1, v.opts.LockTimeout, v.opts.StatementTimeout)
	if err == nil {
		defer pool.Close()
		v.m, err = shardmgr.ReadMap(ctx, pool)
	}
	if err != nil {
		v.problem(CheckCatalog, -1, "", "%v", err)
		return false
	}
	m := v.m
	if m.Cluster != v.cfg.Cluster {
		v.problem(CheckCatalog, -1, "", "the catalog holds cluster %q, the cluster file names %q", m.Cluster, v.cfg.Cluster)
	}
	if len(m.Shards) != v.cfg.Shards {
		v.problem(CheckCatalog, -1, "", "the catalog has %d shards, the cluster file says %d", len(m.Shards), v.cfg.Shards)
	}
	if v.cfg.EpochMS != 0 && v.cfg.EpochMS != m.Layout.Epoch {
		v.problem(CheckCatalog, -1, "", "the catalog's epoch_ms is %d, the cluster file says %d", m.Layout.Epoch, v.cfg.EpochMS)
	}
	for _, h := range v.cfg.Hosts {
		ch, ok := m.Host(h.Name)
		switch {
		case !ok:
			v.problem(CheckCatalog, -1, h.Name, "host is in the cluster file but not in the catalog (run shardid init)")
		case ch.DSN != h.RawDSN():
			v.problem(CheckCatalog, -1, h.Name, "the catalog records another DSN for this host (run shardid init)")
		}
	}
	for _, ch := range m.Hosts {
		if _, ok := v.cfg.Host(ch.Name); !ok {
			v.problem(CheckCatalog, -1, ch.Name, "host is in the catalog (%d shards) but not in the cluster file, so it was not scanned", len(m.ShardsOn(ch.Name)))
		}
	}
	return true
}

func (v *verifier) scanHost(ctx context.Context, h shardmgr.Host, hs *hostScan) {
	// The statements run under server-side timeouts; this bound is for a
	// server that stopped answering altogether.
	ctx, cancel := context.WithTimeout(ctx, connectTimeout(h.DSN)+4*v.opts.StatementTimeout)
	defer cancel()
	pool, err := openVerifyPool(ctx, h.DSN, v.opts.Workers+1, v.opts.LockTimeout, v.opts.StatementTimeout)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		v.problem(CheckHost, -1, h.Name, "unreachable: %s", pg.OneLine(err))
		return
	}
	hs.pool = pool
	if v.opts.Deep {
		if hs.deep, err = openVerifyPool(ctx, h.DSN, v.opts.Workers+1, v.opts.LockTimeout, 0); err != nil {
			v.problem(CheckHost, -1, h.Name, "unreachable: %s", pg.OneLine(err))
			return
		}
	}
	if err := v.scanHostObjects(ctx, hs); err != nil {
		v.problem(CheckHost, -1, h.Name, "scan failed: %v", err)
		return
	}
	hs.ok = true
}

func (v *verifier) scanHostObjects(ctx context.Context, hs *hostScan) error {
	q := hs.pool
	// Clock first, on a quiet connection.
	t0 := v.opts.Now()
	var hostNow time.Time
	if err := q.QueryRow(ctx, `SELECT pg_catalog.clock_timestamp()`).Scan(&hostNow); err != nil {
		return err
	}
	t1 := v.opts.Now()
	if v.opts.hostClock != nil {
		hostNow = v.opts.hostClock(hs.name, hostNow)
	}
	hs.clockErr = t1.Sub(t0) / 2
	hs.clockOffset = hostNow.Sub(t0.Add(hs.clockErr))

	err := q.QueryRow(ctx, `SELECT cluster, host FROM shardid.host_info`).Scan(&hs.infoCluster, &hs.infoHost)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) && !pg.IsUndefinedTable(err) {
		return err
	}
	hs.records = map[int]string{}
	if hs.infoCluster != "" {
		rows, err := q.Query(ctx, `SELECT shard, state FROM shardid.local_shards`)
		if err != nil && !pg.IsUndefinedTable(err) {
			return err
		}
		if err == nil {
			var id int
			var state string
			if _, err := pgx.ForEachRow(rows, []any{&id, &state}, func() error { hs.records[id] = state; return nil }); err != nil {
				return err
			}
		}
	}

	hs.schemas = map[string]bool{}
	rows, err := q.Query(ctx, `SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname ~ '^shard_[0-9]{4}$'`)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		hs.schemas[n] = true
	}
	if hs.generators, err = shardschema.ReadMarkers(ctx, q); err != nil {
		return err
	}
	if hs.retired, err = fence.ReadRetired(ctx, q); err != nil {
		return err
	}

	hs.sequences = map[string]seqInfo{}
	rows, err = q.Query(ctx, `SELECT schemaname || '.' || sequencename, cache_size, increment_by, cycle
		FROM pg_catalog.pg_sequences WHERE sequencename IN ('next_id_counter', 'table_id_seq')`)
	if err != nil {
		return err
	}
	var name string
	var si seqInfo
	if _, err := pgx.ForEachRow(rows, []any{&name, &si.cache, &si.increment, &si.cycle}, func() error {
		hs.sequences[name] = si
		return nil
	}); err != nil {
		return err
	}

	// Columns whose DEFAULT calls a next_id() generator, by the
	// generator's schema: the shard the column's ids belong to.
	hs.columns = map[string][]shardschema.IDColumn{}
	cols, err := shardschema.IDColumns(ctx, q, "")
	if err != nil {
		return err
	}
	for _, col := range cols {
		if !col.Partitioned {
			hs.columns[col.Schema] = append(hs.columns[col.Schema], col)
		}
	}

	var gen string
	rows, err = q.Query(ctx, `SELECT n.nspname, p.oid::pg_catalog.regprocedure::text, p.pronargs,
		  EXISTS (SELECT FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
		          WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = $1`, shsql.AdvanceName)
	if err != nil {
		return err
	}
	hs.advancers = map[string][]advancer{}
	var adv advancer
	if _, err := pgx.ForEachRow(rows, []any{&gen, &adv.signature, &adv.args, &adv.public}, func() error {
		hs.advancers[gen] = append(hs.advancers[gen], adv)
		return nil
	}); err != nil {
		return err
	}

	// Sessions holding a generator's advisory lock: shared by an idle
	// session, a leak that stops pull-ups; exclusive, for longer than a
	// pull-up takes, it blocks every next_id() (confirmBlocked).
	hs.locksAt = time.Now()
	if hs.locks, err = readLockHolders(ctx, q, -1); err != nil {
		return err
	}
	v.reportIdleSharedLocks(hs)
	return nil
}

func (v *verifier) checkClocks() {
	skew := v.opts.MaxClockSkew
	var lo, hi *hostScan
	for _, h := range v.cfg.Hosts {
		hs := v.hosts[h.Name]
		if !hs.ok {
			continue
		}
		if d := hs.clockOffset.Abs() - hs.clockErr; d > skew {
			v.problem(CheckClock, -1, hs.name, "clock differs from the manager's by %s (tolerated: %s)", hs.clockOffset.Round(time.Millisecond), skew)
		}
		if lo == nil || hs.clockOffset < lo.clockOffset {
			lo = hs
		}
		if hi == nil || hs.clockOffset > hi.clockOffset {
			hi = hs
		}
	}
	if lo != nil && hi != nil && hi.clockOffset-lo.clockOffset-hi.clockErr-lo.clockErr > skew {
		v.problem(CheckClock, -1, hi.name, "clock is %s ahead of %s's (tolerated: %s)", (hi.clockOffset - lo.clockOffset).Round(time.Millisecond), lo.name, skew)
	}
}

// shardOfSchema names the shard a generator schema stands for: from its
// shard_NNNN name, else from its marker. ok is false when neither tells.
func shardOfSchema(schema, marker string) (int, bool) {
	if m := shardSchemaRE.FindStringSubmatch(schema); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, true
	}
	if p, _, err := shsql.ParseMarker(marker); err == nil {
		return p.Shard, true
	}
	return 0, false
}

// checkPlacement compares where shards are found with the catalog and
// each host's record.
func (v *verifier) checkPlacement() {
	m := v.m
	found := map[int][]string{} // shard -> hosts holding a schema or generator of it
	for _, h := range v.cfg.Hosts {
		hs := v.hosts[h.Name]
		if !hs.ok {
			continue
		}
		if hs.infoCluster == "" {
			v.problem(CheckHostRecord, -1, hs.name, "the host has no shardid.host_info record (run shardid init)")
		} else if hs.infoCluster != m.Cluster || hs.infoHost != hs.name {
			v.problem(CheckHost, -1, hs.name, "the database belongs to cluster %q as host %q", hs.infoCluster, hs.infoHost)
		}
		here := map[int]bool{}
		for schema := range hs.schemas {
			if id, ok := shardOfSchema(schema, ""); ok {
				here[id] = true
			}
		}
		for schema, rc := range hs.retired {
			// A moved shard's old copy, renamed and fenced, is not an
			// active copy; one whose fence is gone could take writes.
			if !rc.Fenced {
				v.problem(CheckPlacement, rc.Shard, hs.name, "retired copy %s of shard %d is not fenced: it could take writes (drop it: shardid rebalance cleanup --all)", schema, rc.Shard)
			}
		}
		for schema, marker := range hs.generators {
			if _, ok := hs.retired[schema]; ok {
				continue
			}
			if _, isShard := shardOfSchema(schema, ""); isShard {
				continue
			}
			if id, ok := shardOfSchema(schema, marker); ok {
				here[id] = true
				v.problem(CheckPlacement, id, hs.name, "a generator for shard %d lives in schema %s", id, schema)
			}
		}
		for id := range here {
			found[id] = append(found[id], hs.name)
		}
		for id, state := range hs.records {
			switch {
			case id >= len(m.Shards):
				v.problem(CheckHostRecord, id, hs.name, "the host records shard %d, beyond the cluster's %d shards", id, len(m.Shards))
			case m.Shards[id].Host != hs.name && state != "fenced":
				v.problem(CheckHostRecord, id, hs.name, "the host records shard %d as its own (%s), the catalog places it on %s", id, state, m.Shards[id].Host)
			}
		}
	}
	for id := range found {
		slices.Sort(found[id])
	}
	for id := range max(len(m.Shards), 8192) {
		hosts := found[id]
		if id >= len(m.Shards) {
			for _, h := range hosts {
				v.problem(CheckPlacement, id, h, "shard %d exists here but the cluster has %d shards (0..%d)", id, len(m.Shards), len(m.Shards)-1)
			}
			continue
		}
		owner := m.Shards[id].Host
		hs := v.hosts[owner]
		if hs == nil || !hs.ok {
			continue // reported as a host or catalog problem
		}
		if !slices.Contains(hosts, owner) {
			v.problem(CheckPlacement, id, owner, "shard %d is missing from its host (no schema %s)", id, m.Shards[id].Schema)
		}
		if _, ok := hs.records[id]; !ok && hs.infoCluster != "" {
			v.problem(CheckHostRecord, id, owner, "the catalog places shard %d here but the host does not record it", id)
		}
		for _, h := range hosts {
			if h != owner {
				v.problem(CheckPlacement, id, h, "stray copy of shard %d (the catalog places it on %s): it is on %d hosts (%s)", id, owner, len(hosts), strings.Join(hosts, ", "))
			}
		}
	}
}

// shardTask is one shard checked on its host.
type shardTask struct {
	id     int
	schema string
	host   *hostScan
	params shsql.Params // what the catalog expects
	callOK bool         // a generator is there to call
	safe   bool         // the installed generator is the safe variant
}

// callable reports whether the generator may be called: present, and not
// blocked by a session holding its exclusive lock.
func (t *shardTask) callable() bool { return t.callOK && !t.host.blocked[t.id] }

// checkShards runs the per-shard checks on every shard's host, Workers at a
// time per host: generator marker and output, sequence settings, counter
// against stored ids, and the live probe.
func (v *verifier) checkShards(ctx context.Context) {
	m := v.m
	var confirm sync.WaitGroup
	for _, hs := range v.hosts {
		if hs.ok {
			confirm.Go(func() { hs.blocked = v.confirmBlocked(ctx, hs) })
		}
	}
	confirm.Wait()
	byHost := map[string][]*shardTask{}
	for _, s := range m.Shards {
		hs := v.hosts[s.Host]
		if hs == nil || !hs.ok || !hs.schemas[s.Schema] {
			continue
		}
		t := &shardTask{id: s.ID, schema: s.Schema, host: hs, params: catalog.GeneratorParams(m, s.ID)}
		v.checkGenerator(t)
		v.checkSequence(t)
		byHost[s.Host] = append(byHost[s.Host], t)
	}
	type pair struct{ a, b int }
	var (
		pmu   sync.Mutex
		drawn = map[int64]int{}    // id -> shard that returned it
		dups  = map[pair][]int64{} // shards a < b -> ids both returned
	)
	record := func(t *shardTask, ids []int64) {
		pmu.Lock()
		defer pmu.Unlock()
		for _, id := range ids {
			if other, dup := drawn[id]; dup {
				p := pair{min(t.id, other), max(t.id, other)}
				dups[p] = append(dups[p], id)
				continue
			}
			drawn[id] = t.id
		}
		v.rep.ProbeIDs += len(ids)
	}
	defer func() {
		for p, ids := range dups {
			slices.Sort(ids)
			v.problem(CheckProbe, p.a, m.Shards[p.a].Host, "%d ids drawn from shard %d were also drawn from shard %d on %s, e.g. %d",
				len(ids), p.a, p.b, m.Shards[p.b].Host, ids[0])
		}
	}()
	var wg sync.WaitGroup
	for _, tasks := range byHost {
		work := make(chan *shardTask)
		for range v.opts.Workers {
			wg.Go(func() {
				for t := range work {
					// The statements run under server-side timeouts; this
					// bound is for a server that stopped answering.
					tctx, cancel := context.WithTimeout(ctx, time.Duration(len(t.host.columns[t.schema])+6)*v.opts.StatementTimeout)
					v.checkCounter(tctx, t)
					v.checkOutput(tctx, t)
					v.probe(tctx, t, record)
					cancel()
				}
			})
		}
		wg.Go(func() {
			defer close(work)
			for _, t := range tasks {
				select {
				case work <- t:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
}

func (v *verifier) checkGenerator(t *shardTask) {
	marker, ok := t.host.generators[t.schema]
	if !ok {
		v.problem(CheckGenerator, t.id, t.host.name, "%s.next_id() is missing", t.schema)
		return
	}
	t.callOK = true
	got, _, err := shsql.ParseMarker(marker)
	if err != nil {
		v.problem(CheckGenerator, t.id, t.host.name, "%s.next_id() is not a shardid generator (comment %q)", t.schema, marker)
		return
	}
	want := t.params
	t.safe = got.Variant == shsql.Safe
	for _, a := range t.host.advancers[t.schema] {
		if a.public {
			v.problem(CheckGenerator, t.id, t.host.name, "PUBLIC may execute %s: any role with USAGE on the schema can push the counter to its maximum and stop the generator for good (run shardid migrate generator, or the install SQL again)", a.signature)
		} else if a.args == 1 {
			v.note(CheckGenerator, t.id, t.host.name, "%s is the form of an older install SQL, without the guard against a floor far ahead of the clock (run shardid migrate generator)", a.signature)
		}
	}
	if got.Variant != want.Variant {
		v.problem(CheckGenerator, t.id, t.host.name, "generator variant is %s, want %s", got.Variant, want.Variant)
	}
	if got.Shard != want.Shard {
		v.problem(CheckGenerator, t.id, t.host.name, "generator is installed for shard %d", got.Shard)
	}
	if got.Epoch != want.Epoch || got.TimeBits != want.TimeBits || got.ShardBits != want.ShardBits || got.SeqBits != want.SeqBits {
		v.problem(CheckGenerator, t.id, t.host.name, "generator epoch/layout is %d %d/%d/%d, want %d %d/%d/%d",
			got.Epoch, got.TimeBits, got.ShardBits, got.SeqBits, want.Epoch, want.TimeBits, want.ShardBits, want.SeqBits)
	}
}

func (v *verifier) checkSequence(t *shardTask) {
	name := t.schema + "." + shsql.CounterName
	if !t.safe {
		if _, ok := t.host.sequences[t.schema+"."+shsql.InstagramSeqName]; ok {
			name = t.schema + "." + shsql.InstagramSeqName
		}
	}
	s, ok := t.host.sequences[name]
	if !ok {
		if t.callOK {
			v.problem(CheckSequence, t.id, t.host.name, "counter sequence %s is missing", name)
		}
		return
	}
	if s.cache > 1 {
		v.problem(CheckSequence, t.id, t.host.name, "%s has CACHE %d: sessions hand out values out of order, which the fence relies on (want CACHE 1)", name, s.cache)
	}
	if s.cycle {
		v.problem(CheckSequence, t.id, t.host.name, "%s has CYCLE: it would start over and repeat ids (want NO CYCLE)", name)
	}
	if s.increment != 1 {
		v.problem(CheckSequence, t.id, t.host.name, "%s has INCREMENT %d (want 1)", name, s.increment)
	}
}

// checkCounter compares the safe counter with the largest id stored in the
// shard's tables on its host. The stored ids are read first: anything
// inserted meanwhile came from a counter value the later read sees.
func (v *verifier) checkCounter(ctx context.Context, t *shardTask) {
	cols := t.host.columns[t.schema]
	if !t.safe || len(cols) == 0 {
		return
	}
	if _, ok := t.host.sequences[t.schema+"."+shsql.CounterName]; !ok {
		return
	}
	var maxID *int64
	var where shardschema.IDColumn
	for _, c := range cols {
		m, err := shardschema.MaxID(ctx, t.host.pool, c)
		if err != nil {
			v.problem(CheckCounter, t.id, t.host.name, "read max(%s): %v", c, err)
			return
		}
		if m != nil && (maxID == nil || *m > *maxID) {
			maxID, where = m, c
		}
	}
	if maxID == nil {
		return
	}
	var last int64
	var called bool
	seq := pgx.Identifier{t.schema, shsql.CounterName}.Sanitize()
	if err := t.host.pool.QueryRow(ctx, "SELECT last_value, is_called FROM "+seq).Scan(&last, &called); err != nil {
		v.problem(CheckCounter, t.id, t.host.name, "read %s: %v", seq, err)
		return
	}
	next := last
	if called {
		next++
	}
	if nextID := shardschema.IDOfCounter(v.m.Layout, next, t.id); nextID <= *maxID {
		force := ""
		if shardschema.UnixMilli(v.m.Layout, *maxID) > v.opts.Now().UnixMilli()+shsql.AdvanceMarginMS {
			force = ", force => true" // the stored id lies beyond the hour next_id_advance allows
		}
		v.problem(CheckCounter, t.id, t.host.name, "counter is behind stored ids: the next id would be %d but %s already holds %d (rewound or restored sequence, or a table-only restore; repair: SELECT %s(%d%s))",
			nextID, where, *maxID, pgx.Identifier{t.schema, shsql.AdvanceName}.Sanitize(), *maxID, force)
	}
}

// checkOutput calls the generator and decodes its id.
func (v *verifier) checkOutput(ctx context.Context, t *shardTask) {
	if !t.callable() {
		return
	}
	id, hostMS, err := v.drawOne(ctx, t)
	if err != nil {
		if waitedOut(err) {
			v.reportBlockedCall(ctx, t, fmt.Sprintf("calling %s.next_id()", t.schema), err)
			t.callOK = false // the probe would wait as long
			return
		}
		v.problem(CheckGeneratorID, t.id, t.host.name, "calling %s.next_id() failed: %v", t.schema, pg.OneLine(err))
		return
	}
	l := v.m.Layout
	if got := shardschema.ShardOf(l, id); got != t.id {
		v.problem(CheckGeneratorID, t.id, t.host.name, "next_id() returned %d, which carries shard %d", id, got)
	}
	tol := max(v.opts.MaxClockSkew, 2*time.Second)
	diff := time.Duration(shardschema.UnixMilli(l, id)-hostMS) * time.Millisecond
	if id >= 0 && diff.Abs() <= tol {
		return
	}
	if id >= 0 && diff > 0 && t.safe && v.waitsForClock(ctx, t, id, hostMS) {
		v.note(CheckGeneratorID, t.id, t.host.name, "counter is %s ahead of the host's clock and waits for it (advanced by next_id_advance, carried from stored ids or another host, or the clock stepped back): ids carry future times until the clock catches up",
			diff.Round(time.Millisecond))
		return
	}
	v.problem(CheckGeneratorID, t.id, t.host.name, "next_id() returned %d, whose time under the cluster's epoch is %s off the host's clock (wrong epoch or layout?)", id, diff.Round(time.Millisecond))
}

// drawOne calls the generator once, with the host's clock in ms.
func (v *verifier) drawOne(ctx context.Context, t *shardTask) (id, hostMS int64, err error) {
	q := fmt.Sprintf("SELECT %s(), pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000)::bigint",
		pgx.Identifier{t.schema, shsql.FunctionName}.Sanitize())
	err = t.host.pool.QueryRow(ctx, q).Scan(&id, &hostMS)
	return id, hostMS, err
}

// waitsForClock tells a counter that runs ahead of the clock and waits for
// it (advanced, carried over, a clock that stepped back) from a generator
// that follows a clock of its own (wrong epoch or layout): over a pause the
// latter's ids move on with the clock, the former's stand nearly still
// (only the ids drawn meanwhile move it).
func (v *verifier) waitsForClock(ctx context.Context, t *shardTask, id, hostMS int64) bool {
	select {
	case <-time.After(waitsForClockPause):
	case <-ctx.Done():
		return false
	}
	id2, hostMS2, err := v.drawOne(ctx, t)
	if err != nil {
		return false
	}
	l := v.m.Layout
	moved, elapsed := shardschema.UnixMilli(l, id2)-shardschema.UnixMilli(l, id), hostMS2-hostMS
	return id2 > id && elapsed > 0 && moved*4 < elapsed
}

// waitsForClockPause is the pause of waitsForClock.
const waitsForClockPause = 200 * time.Millisecond

// probe draws ids from the shard in two concurrent sessions.
func (v *verifier) probe(ctx context.Context, t *shardTask, record func(*shardTask, []int64)) {
	if !t.callable() {
		return
	}
	q := fmt.Sprintf("SELECT %s() FROM pg_catalog.generate_series(1, $1)", pgx.Identifier{t.schema, shsql.FunctionName}.Sanitize())
	n := (v.opts.ProbeIDs + 1) / 2
	var g errgroup.Group
	res := make([][]int64, 2)
	for i := range res {
		g.Go(func() error {
			rows, err := t.host.pool.Query(ctx, q, n)
			if err != nil {
				return err
			}
			res[i], err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if waitedOut(err) {
			v.reportBlockedCall(ctx, t, "drawing ids", err)
			return
		}
		v.problem(CheckProbe, t.id, t.host.name, "drawing ids failed: %v", pg.OneLine(err))
		return
	}
	// Within one shard a repeat is the shard's own; across shards the
	// cluster-wide map finds it.
	seen := map[int64]bool{}
	var ids []int64
	for _, r := range res {
		for _, id := range r {
			if seen[id] {
				v.problem(CheckProbe, t.id, t.host.name, "shard %d returned id %d twice", t.id, id)
				continue
			}
			seen[id] = true
			ids = append(ids, id)
		}
	}
	record(t, ids)
}

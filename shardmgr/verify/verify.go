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

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	shsql "github.com/shardid/shardid/sql"
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
	// the shard's tables (columns whose DEFAULT is its generator), and no
	// stored id lies beyond the host's clock plus the margin of
	// next_id_advance where the counter would reach it (a forged id).
	CheckCounter = "counter"
	// CheckOwner: the toolkit's objects in every shard schema (generator,
	// counter, helpers, fence function, the functions of its triggers)
	// belong to the toolkit's role, the owner of the host's shardid
	// schema.
	CheckOwner = "owner"
	// CheckLock: no idle session holds the generator's shared advisory
	// lock, no session blocks the generator with its exclusive lock, and no
	// call of the generator waits out verify's lock or statement timeout;
	// each names the session holding the lock.
	CheckLock = "lock"
	// CheckClock: each host's clock agrees with the manager's and the
	// others' within Options.MaxClockSkew.
	CheckClock = "clock"
	// CheckProbe: ids drawn concurrently from every shard are unique
	// across the cluster.
	CheckProbe = "probe"
	// CheckGrants: a moved shard's copy has the owners, privileges,
	// default privileges and row-level security of its retired copy, while
	// a host keeps one.
	CheckGrants = "grants"
	// CheckStoredShard (deep): every stored id decodes to the shard it is
	// stored in.
	CheckStoredShard = "stored-shard"
	// CheckDuplicateID (deep): no stored id appears twice.
	CheckDuplicateID = "duplicate-id"
	// CheckCatalogStale: the catalog is not older than the hosts' own
	// records (a catalog restored from an older backup): no host recorded
	// a generation the catalog has not reached, and every shard is where
	// the hosts say it lives (shardmgr.CompareHostRecords).
	CheckCatalogStale = "catalog-stale"
)

// Defaults of Options.
const (
	// DefaultMaxClockSkew is Options.MaxClockSkew when zero.
	DefaultMaxClockSkew = time.Second
	// DefaultProbeIDs is Options.ProbeIDs when zero.
	DefaultProbeIDs = 16
	// DefaultWorkers is Options.Workers when zero.
	DefaultWorkers = 4
)

// Options adjust Verify. The zero value is fine.
type Options struct {
	// Deep reads every id stored in a column whose DEFAULT is a shard
	// generator (CheckStoredShard, CheckDuplicateID).
	Deep bool
	// MaxClockSkew is the largest clock difference tolerated between a
	// host and the manager or two hosts. Zero means DefaultMaxClockSkew
	// (1s).
	MaxClockSkew time.Duration
	// ProbeIDs is the number of ids the live probe draws from every shard,
	// in two concurrent sessions. Zero means DefaultProbeIDs (16).
	ProbeIDs int
	// Workers is the number of connections per host. Zero means
	// DefaultWorkers (4).
	Workers int
	// Now is the manager's clock. Zero means time.Now.
	Now func() time.Time
	// LockTimeout bounds every wait of a verify statement for a lock, the
	// generator's advisory lock included: a generator call that waits
	// longer is reported (CheckLock) with the session holding the lock.
	// Zero means DefaultLockTimeout (2s).
	LockTimeout time.Duration
	// StatementTimeout bounds every statement verify runs but the reads of
	// Deep. Zero means DefaultStatementTimeout (30s). Connecting is bounded by each DSN's
	// connect_timeout, 30 s (pg.DefaultConnectTimeout) when it has none.
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
	// Fix names the operator step that repairs the problem, when one
	// does (FixNone otherwise): the library says what is wrong, the CLI
	// which command fixes it. Not part of the JSON report.
	Fix Fix `json:"-"`
}

// Fix is an operator step that repairs a problem verify found.
type Fix int

// The steps a problem's Fix names.
const (
	FixNone              Fix = iota
	FixInit                  // init applies the file's hosts, records and generators
	FixGenerator             // the generator upgrade (migrate generator)
	FixInitOrGenerator       // init, or the generator upgrade
	FixDropRetiredCopy       // cleanup of every retired copy, now
	FixCleanupRetired        // cleanup drops a retired copy once it is not wanted
	FixFinishMove            // the move passed its point of no return: finish it (apply)
	FixResumeOrAbortMove     // an unfinished move: resume it (apply) or undo it (abort)
	FixRepairCatalog         // the catalog is older than the hosts, or holds no cluster while they do: rebuild its map from their records
	FixFailover              // a standby promoted without the command: shardid host failover (failover.go)
	FixNewServer             // the host's database restored onto another server: host failover --new-server (failover.go)
	FixDropStray             // a stray copy: drop it once it holds no row the live copy lacks (repair.DropStray)
	FixUntrusted             // another role made or planted an object the toolkit writes through: the problem's SQL, run as a superuser after checking it (trust.go)
)

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

// Report is the outcome of Verify. JSON: {"ok":bool,"problems":[...],
// "generators":[...]}, with "notes":[...] when there are notes.
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
	// Generators counts the shards by the generator they run (PL/pgSQL,
	// C, Instagram's), sorted by kind; a shard whose generator is missing
	// or unreadable is in none.
	Generators []GeneratorCount `json:"generators"`
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
func Verify(ctx context.Context, c *cluster.Cluster, opts Options) (*Report, error) {
	start := time.Now()
	cfg := c.Config()
	if opts.MaxClockSkew <= 0 {
		opts.MaxClockSkew = DefaultMaxClockSkew
	}
	if opts.ProbeIDs <= 0 {
		opts.ProbeIDs = DefaultProbeIDs
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = DefaultStatementTimeout
	}
	v := &verifier{c: c, cfg: cfg, opts: opts, rep: &Report{Problems: []Problem{}, Generators: []GeneratorCount{}}}
	if err := checkCatalogVersion(ctx, v); err != nil {
		return nil, err
	}
	v.run(ctx)
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
	r.finishGenerators()
	r.Elapsed = time.Since(start)
	return r, nil
}

// checkCatalogVersion refuses a catalog whose schema this binary may not
// read (a *shardmgr.CatalogVersionError): what verify would conclude from
// it proves nothing. A catalog it cannot reach is left to the catalog
// check, which reports it as a problem.
func checkCatalogVersion(ctx context.Context, vr *verifier) error {
	pool, err := vr.c.CatalogPoolAs(ctx, vr.session(vr.opts.StatementTimeout))
	if err != nil {
		return nil
	}
	v, err := shardmgr.ReadCatalogVersion(ctx, pool)
	if err != nil {
		return nil
	}
	return v.Check(shardmgr.UseRead)
}

// check defines one of Verify's checks: its name (Problem.Check), whether
// only a deep run makes it, and the pass over the cluster that finds its
// problems. Checks share passes (one scan of a host feeds several of
// them); each pass runs once, at its first check, in this order, which is
// also the order of the report. A pass that returns false ends the run
// (nothing after it can be judged).
type check struct {
	name string
	deep bool
	pass *pass
}

// pass is one walk over the cluster.
type pass struct {
	run func(v *verifier, ctx context.Context) bool
}

var (
	catalogPass   = &pass{(*verifier).readCatalog}
	hostsPass     = &pass{(*verifier).scanHosts}
	placementPass = &pass{func(v *verifier, _ context.Context) bool { v.checkPlacement(); return true }}
	shardsPass    = &pass{func(v *verifier, ctx context.Context) bool { v.checkShards(ctx); return true }}
	clockPass     = &pass{func(v *verifier, _ context.Context) bool { v.checkClocks(); return true }}
	storedPass    = &pass{func(v *verifier, ctx context.Context) bool { v.checkStored(ctx); return true }}
	grantsPass    = &pass{func(v *verifier, ctx context.Context) bool { v.checkGrants(ctx); return true }}
	stalePass     = &pass{func(v *verifier, _ context.Context) bool { v.checkCatalogStale(); return true }}
)

// checks is every check Verify knows, in the report's order.
var checks = []check{
	{name: CheckCatalog, pass: catalogPass},
	{name: CheckHost, pass: hostsPass},
	{name: CheckPlacement, pass: placementPass},
	{name: CheckHostRecord, pass: hostsPass},
	{name: CheckCatalogStale, pass: stalePass},
	{name: CheckFailover, pass: failoverPass},
	{name: CheckGenerator, pass: shardsPass},
	{name: CheckGeneratorID, pass: shardsPass},
	{name: CheckSequence, pass: shardsPass},
	{name: CheckOwner, pass: hostsPass},
	{name: CheckTrust, pass: hostsPass}, // and the catalog's, when it is read
	{name: CheckCounter, pass: shardsPass},
	{name: CheckLock, pass: shardsPass}, // and the host scan, for idle holders
	{name: CheckClock, pass: clockPass},
	{name: CheckProbe, pass: shardsPass},
	{name: CheckGrants, pass: grantsPass},
	{name: CheckStoredShard, deep: true, pass: storedPass},
	{name: CheckDuplicateID, deep: true, pass: storedPass},
}

func checkOrder(c string) int {
	return slices.IndexFunc(checks, func(k check) bool { return k.name == c })
}

type verifier struct {
	c     *cluster.Cluster
	cfg   *shardmgr.Config
	opts  Options
	m     *shardmgr.ShardMap
	hosts map[string]*hostScan // by name: the file's hosts
	// openMoves are the journal's unfinished moves by shard: their copies
	// are a move's, not strays.
	openMoves map[int]catalog.OpenMove

	mu  sync.Mutex
	rep *Report
}

func (v *verifier) problem(check string, shard int, host, format string, args ...any) {
	v.problemFix(FixNone, check, shard, host, format, args...)
}

// problemFix records a problem that fix repairs.
func (v *verifier) problemFix(fix Fix, check string, shard int, host, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rep.Problems = append(v.rep.Problems, Problem{Check: check, Shard: shard, Host: host, Detail: fmt.Sprintf(format, args...), Fix: fix})
}

// note records a finding that is no failure (Report.Notes).
func (v *verifier) note(check string, shard int, host, format string, args ...any) {
	v.noteFix(FixNone, check, shard, host, format, args...)
}

// noteFix records a note that fix addresses.
func (v *verifier) noteFix(fix Fix, check string, shard int, host, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rep.Notes = append(v.rep.Notes, Problem{Check: check, Shard: shard, Host: host, Detail: fmt.Sprintf(format, args...), Fix: fix})
}

var shardSchemaRE = regexp.MustCompile(`^shard_([0-9]{4})$`)

func (v *verifier) run(ctx context.Context) {
	var run []check
	for _, c := range checks {
		if !c.deep || v.opts.Deep {
			run = append(run, c)
			v.rep.Checks = append(v.rep.Checks, c.name)
		}
	}
	ran := map[*pass]bool{}
	for _, c := range run {
		if ran[c.pass] {
			continue
		}
		ran[c.pass] = true
		if !c.pass.run(v, ctx) {
			return
		}
	}
}

// scanHosts scans every host of the cluster file, in parallel.
func (v *verifier) scanHosts(ctx context.Context) bool {
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
		return false
	}
	if v.opts.afterScan != nil {
		v.opts.afterScan()
	}
	return true
}

// readCatalog reads the map and compares it with the cluster file.
func (v *verifier) readCatalog(ctx context.Context) bool {
	pool, err := v.c.CatalogPoolAs(ctx, v.session(v.opts.StatementTimeout))
	if err == nil {
		v.m, err = shardmgr.ReadMap(ctx, pool)
		if err == nil {
			v.openMoves, err = catalog.ReadOpenMoves(ctx, pool)
		}
	}
	if errors.Is(err, shardmgr.ErrNotInitialized) {
		if held := v.hostsHoldingCluster(ctx); held != "" {
			v.problemFix(FixRepairCatalog, CheckCatalog, -1, "", "the catalog holds no cluster (emptied?), but %s", held)
			return false
		}
	}
	if err != nil {
		v.problem(CheckCatalog, -1, "", "%v", err)
		return false
	}
	found, err := trustFindings(ctx, pool, nil)
	if err != nil {
		v.problem(CheckCatalog, -1, "", "%v", err)
		return false
	}
	v.reportUntrusted("", found)
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
	for _, d := range catalog.CompareHosts(m, v.cfg) {
		switch d.Kind {
		case catalog.HostAdded:
			v.problemFix(FixInit, CheckCatalog, -1, d.Name, "host is in the cluster file but not in the catalog")
		case catalog.HostDSN:
			v.problemFix(FixInit, CheckCatalog, -1, d.Name, "the catalog records another DSN for this host")
		case catalog.HostRemoved:
			v.problem(CheckCatalog, -1, d.Name, "host is in the catalog (%d shards) but not in the cluster file, so it was not scanned", len(m.ShardsOn(d.Name)))
		}
	}
	return true
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
		switch err := hs.schemaErr; {
		case errors.Is(err, shardmgr.ErrCatalogTooNew):
			v.problem(CheckHostRecord, -1, hs.name, "%v (upgrade the binary)", err)
		case errors.Is(err, shardmgr.ErrCatalogTooOld):
			v.problemFix(FixInit, CheckHostRecord, -1, hs.name, "%v", err)
		case err != nil:
			v.problem(CheckHostRecord, -1, hs.name, "%v (repair it by hand: docs/upgrading.md)", err)
		}
		if hs.infoCluster == "" {
			v.problemFix(FixInit, CheckHostRecord, -1, hs.name, "the host has no shardid.host_info record")
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
				v.problemFix(FixDropRetiredCopy, CheckPlacement, rc.Shard, hs.name, "retired copy %s of shard %d is not fenced: it could take writes", schema, rc.Shard)
			} else if rc.Settable {
				v.problemFix(FixDropRetiredCopy, CheckPlacement, rc.Shard, hs.name, "retired copy %s of shard %d has an older release's fence, which any role passes by setting shardid.fence_bypass", schema, rc.Shard)
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
	for id := range max(len(m.Shards), shardmgr.MaxShards) {
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
			if h == owner {
				continue
			}
			if om, ok := v.openMoves[id]; ok && (h == om.From || h == om.To) {
				// Still a problem: the cluster is not settled until the
				// move is finished or undone; but not a stray.
				if om.Flipped {
					v.problemFix(FixFinishMove, CheckPlacement, id, h, "copy on %s belongs to unfinished move %d, which flipped the map to %s", h, om.ID, om.To)
				} else {
					v.problemFix(FixResumeOrAbortMove, CheckPlacement, id, h, "copy on %s belongs to unfinished move %d", h, om.ID)
				}
				continue
			}
			v.problemFix(FixDropStray, CheckPlacement, id, h, "stray copy of shard %d (the catalog places it on %s): it is on %d hosts (%s)", id, owner, len(hosts), strings.Join(hosts, ", "))
		}
	}
}

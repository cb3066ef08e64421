package rebalance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// PlanBy says what a rebalance evens out.
type PlanBy string

// What a plan balances.
const (
	// ByCount balances the number of shards per host.
	ByCount PlanBy = "count"
	// BySize balances the total relation size per host, measured on the
	// hosts.
	BySize PlanBy = "size"
)

// PlanOptions adjust PlanRebalance. The zero value balances counts and
// checks the hosts for online moves, one at a time.
type PlanOptions struct {
	// By is what the plan evens out: ByCount (when empty) or BySize.
	By PlanBy
	// Mode is the mode the moves would run in (MoveOnline when empty):
	// the preflight checks the hosts for it, and MoveAuto picks a mode
	// per move.
	Mode MoveMode
	// Parallel is how many moves would run at once, for the preflight's
	// count of slots and workers. Zero means one at a time.
	Parallel int
	// Migrations are the shards' migrations: when given, the preflight
	// also checks that they build each moving shard with the tables it
	// has (Apply and MoveShard always check, with their own).
	Migrations *migrate.MigrationSet
	// Only, when set, limits the plan to emptying these hosts, each of
	// which the cluster file marks drain: all their shards move (by count
	// to the hosts below their share, by size to the least loaded), and
	// no other host gives any away. It is how a host is drained
	// (shardid host drain) without rebalancing the rest.
	Only []string

	// moving: the plan is an apply's or a move's, whose migrations (nil:
	// none) are Migrations.
	moving bool
}

// PlannedMove is one shard to move. JSON: {"shard":N,"from":"pg1","to":"pg4","bytes":N,"mode":"online"}.
type PlannedMove struct {
	Shard int    `json:"shard"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Bytes is the shard's total relation size on its host.
	Bytes int64 `json:"bytes"`
	// Mode is the mode the move runs in: the one asked for, or in auto
	// mode the one the preflight chose (ModeReason says why offline).
	Mode       MoveMode `json:"mode,omitempty"`
	ModeReason string   `json:"mode_reason,omitempty"`
}

// HostLoad is what one host holds before or after a plan.
type HostLoad struct {
	Host   string
	Drain  bool
	Shards int
	Bytes  int64
}

// Plan is the outcome of PlanRebalance. JSON: {"moves":[...],"preflight":[...]}.
type Plan struct {
	Moves []PlannedMove `json:"moves"`
	// Preflight are the checks of the hosts for the online moves (see
	// Check); a failed one makes PlanRebalance return a *PreflightError
	// with the plan.
	Preflight []Check `json:"preflight"`
	// By is what the plan balances.
	By PlanBy `json:"-"`
	// Generation is the catalog generation the plan was made from.
	Generation int64 `json:"-"`
	// Before and After are the hosts' loads, in the cluster file's order.
	Before, After []HostLoad `json:"-"`
}

// PlanRebalance computes the moves that balance the cluster of cfg: hosts
// added to the cluster file take shards, hosts marked drain give all of
// theirs away. It reads the catalog and measures the shards on their
// hosts, and changes nothing. It then checks the hosts for the moves in
// opts.Mode, opts.Parallel at a time (the preflight, Plan.Preflight): when
// a check fails it returns the plan with a *PreflightError.
//
// By count, it makes the fewest moves that leave every host that is not
// draining with floor(n/h) or ceil(n/h) shards; hosts that already hold
// the most keep the larger share, so a host that is balanced gives nothing
// away. By size, it moves shards from the most loaded host to the least
// loaded, each time the shard that brings the two closest to the mean,
// until no host is above the mean by more than half the largest shard or
// no move helps. Both are
// deterministic: ties go to the lower host name and the higher shard id.
func PlanRebalance(ctx context.Context, c *cluster.Cluster, opts PlanOptions) (*Plan, error) {
	// Bad options are refused before anything connects.
	if err := opts.check(); err != nil {
		return nil, err
	}
	cat, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	return planRebalance(ctx, c, cat, func(ctx context.Context, name string) (*pgxpool.Pool, error) {
		return c.HostPool(ctx, name, cluster.Session{})
	}, opts, nil)
}

// planRebalance plans on the catalog cat, measuring shards on the pools
// that poolOf gives (an apply passes its mover's, which the moves use),
// then runs the preflight for the plan's moves and the journaled moves
// open (which keep their modes; planned moves of their shards are left
// out of the checks).
func planRebalance(ctx context.Context, c *cluster.Cluster, cat shardmgr.Querier, poolOf func(context.Context, string) (*pgxpool.Pool, error), opts PlanOptions, open []*MoveRecord) (*Plan, error) {
	cfg := c.Config()
	if opts.By == "" {
		opts.By = ByCount
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	m, err := shardmgr.ReadMap(ctx, cat)
	if err != nil {
		if errors.Is(err, shardmgr.ErrNotInitialized) {
			return nil, err
		}
		return nil, fmt.Errorf("catalog: %w", err)
	}
	for _, ch := range m.Hosts {
		if _, ok := cfg.Host(ch.Name); !ok && len(m.ShardsOn(ch.Name)) > 0 {
			return nil, fmt.Errorf("%w: host %s holds %d shards in the catalog but is not in the cluster file", shardmgr.ErrClusterMismatch, ch.Name, len(m.ShardsOn(ch.Name)))
		}
	}
	sizes, err := measureShards(ctx, cfg, m, poolOf)
	if err != nil {
		return nil, err
	}
	for _, name := range opts.Only {
		if h, ok := cfg.Host(name); !ok || !h.Drain {
			return nil, fmt.Errorf("plan only host %s: %w (not a host of the cluster file marked drain)", name, shardmgr.ErrUnknownHost)
		}
	}
	plan, err := planMoves(m, cfg.Hosts, sizes, opts.By, opts.Only)
	if err != nil {
		return nil, err
	}
	return plan, plan.preflight(ctx, c, m, poolOf, opts, open)
}

// preflight checks the hosts for the plan's moves and the open ones, and
// sets each planned move's mode.
func (p *Plan) preflight(ctx context.Context, c *cluster.Cluster, m *shardmgr.ShardMap, poolOf func(context.Context, string) (*pgxpool.Pool, error), opts PlanOptions, open []*MoveRecord) error {
	if opts.Mode == "" {
		opts.Mode = MoveOnline
	}
	planned := slices.DeleteFunc(slices.Clone(p.Moves), func(pm PlannedMove) bool {
		return slices.ContainsFunc(open, func(r *MoveRecord) bool { return r.Shard == pm.Shard })
	})
	res, err := runPreflight(ctx, c, poolOf, movesToCheck(m, planned, opts.Mode, open), opts.Parallel)
	if err != nil {
		return err
	}
	if opts.moving || opts.Migrations != nil {
		sc, err := schemaChecks(ctx, m, poolOf, schemaMoves(m, planned, open), opts.Migrations)
		if err != nil {
			return err
		}
		res.Checks = append(res.Checks, sc...)
	}
	p.Preflight = res.Checks
	if p.Preflight == nil {
		p.Preflight = []Check{}
	}
	for i := range p.Moves {
		p.Moves[i].Mode, p.Moves[i].ModeReason = res.Modes[p.Moves[i].Shard], res.Reasons[p.Moves[i].Shard]
	}
	return preflightError(res.Checks)
}

// measureShards reads every shard's total relation size on its host.
func measureShards(ctx context.Context, cfg *shardmgr.Config, m *shardmgr.ShardMap, poolOf func(context.Context, string) (*pgxpool.Pool, error)) ([]int64, error) {
	sizes := make([]int64, len(m.Shards))
	g, gctx := errgroup.WithContext(ctx)
	for _, h := range cfg.Hosts {
		ids := m.ShardsOn(h.Name)
		if len(ids) == 0 {
			continue
		}
		g.Go(func() error {
			pool, err := poolOf(gctx, h.Name)
			if err != nil {
				return pg.OnHost(h.Name, err)
			}
			schemas := make([]string, len(ids))
			for i, id := range ids {
				schemas[i] = m.Shards[id].Schema
			}
			rows, err := pool.Query(gctx, `SELECT n.nspname, coalesce(sum(pg_catalog.pg_total_relation_size(c.oid)), 0)::bigint
				FROM pg_catalog.pg_namespace n
				LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relkind IN ('r', 'm', 'S')
				WHERE n.nspname = ANY($1) GROUP BY n.nspname`, schemas)
			if err != nil {
				return fmt.Errorf("host %s: measure shards: %w", h.Name, err)
			}
			bySchema := map[string]int64{}
			var name string
			var size int64
			if _, err := pgx.ForEachRow(rows, []any{&name, &size}, func() error { bySchema[name] = size; return nil }); err != nil {
				return fmt.Errorf("host %s: measure shards: %w", h.Name, err)
			}
			for _, id := range ids {
				sizes[id] = bySchema[m.Shards[id].Schema]
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sizes, nil
}

// planMoves is the planner proper: m places the shards, hosts (the cluster
// file's) say which hosts exist and drain, sizes are the shards' bytes.
func planMoves(m *shardmgr.ShardMap, hosts []shardmgr.Host, sizes []int64, by PlanBy, only []string) (*Plan, error) {
	p, err := newPlanner(m, hosts, sizes)
	if err != nil {
		return nil, err
	}
	p.only = only
	p.plan = &Plan{By: by, Generation: m.Generation, Moves: []PlannedMove{}, Before: p.loads()}
	switch by {
	case ByCount:
		p.balanceCounts(len(m.Shards))
	case BySize:
		p.balanceSizes(len(m.Shards))
	}
	p.plan.After = p.loads()
	return p.plan, nil
}

// planner is a plan being made: every host's shards and bytes as the
// planned moves leave them.
type planner struct {
	hosts    []shardmgr.Host
	sizes    []int64
	state    map[string]*hostState
	eligible []*hostState // the hosts that take shards: not draining
	plan     *Plan
	only     []string // when set, the only hosts that give shards (PlanOptions.Only)
}

// gives reports whether host hs may give shards away in this plan.
func (p *planner) gives(hs *hostState) bool {
	return len(p.only) == 0 || slices.Contains(p.only, hs.name)
}

type hostState struct {
	name   string
	drain  bool
	shards []int // ascending
	bytes  int64
}

func newPlanner(m *shardmgr.ShardMap, hosts []shardmgr.Host, sizes []int64) (*planner, error) {
	p := &planner{hosts: hosts, sizes: sizes, state: map[string]*hostState{}}
	for _, h := range hosts {
		hs := &hostState{name: h.Name, drain: h.Drain}
		p.state[h.Name] = hs
		if !h.Drain {
			p.eligible = append(p.eligible, hs)
		}
	}
	for _, s := range m.Shards {
		hs := p.state[s.Host]
		if hs == nil {
			return nil, fmt.Errorf("%w: shard %d is on host %s, which is not in the cluster file", shardmgr.ErrClusterMismatch, s.ID, s.Host)
		}
		hs.shards = append(hs.shards, s.ID)
		hs.bytes += sizes[s.ID]
	}
	if len(p.eligible) == 0 {
		return nil, ErrNoTargetHost
	}
	return p, nil
}

// loads are the hosts' loads now, in the cluster file's order.
func (p *planner) loads() []HostLoad {
	out := make([]HostLoad, len(p.hosts))
	for i, h := range p.hosts {
		hs := p.state[h.Name]
		out[i] = HostLoad{Host: h.Name, Drain: h.Drain, Shards: len(hs.shards), Bytes: hs.bytes}
	}
	return out
}

// move plans shard id's move from one host to another.
func (p *planner) move(id int, from, to *hostState) {
	p.plan.Moves = append(p.plan.Moves, PlannedMove{Shard: id, From: from.name, To: to.name, Bytes: p.sizes[id]})
	from.shards = slices.DeleteFunc(from.shards, func(s int) bool { return s == id })
	from.bytes -= p.sizes[id]
	to.shards = append(to.shards, id)
	slices.Sort(to.shards)
	to.bytes += p.sizes[id]
}

// balanceCounts gives every host that takes shards n/k of the n shards
// (the hosts holding the most keep the larger share), draining hosts none.
func (p *planner) balanceCounts(n int) {
	k := len(p.eligible)
	base, extra := n/k, n%k
	byCount := slices.Clone(p.eligible)
	slices.SortStableFunc(byCount, func(a, b *hostState) int {
		return cmp.Or(cmp.Compare(len(b.shards), len(a.shards)), strings.Compare(a.name, b.name))
	})
	quota := map[string]int{}
	for i, hs := range byCount {
		quota[hs.name] = base
		if i < extra {
			quota[hs.name]++
		}
	}
	// Donors in the file's order give their highest shards first;
	// receivers in the file's order fill up in turn.
	type gift struct {
		id   int
		from *hostState
	}
	var give []gift
	for _, h := range p.hosts {
		hs := p.state[h.Name]
		if !p.gives(hs) {
			continue
		}
		surplus := len(hs.shards) - quota[h.Name] // quota 0 when draining
		for i := 0; i < surplus; i++ {
			give = append(give, gift{hs.shards[len(hs.shards)-1-i], hs})
		}
	}
	for _, h := range p.hosts {
		hs := p.state[h.Name]
		for !hs.drain && len(hs.shards) < quota[h.Name] && len(give) > 0 {
			g := give[0]
			give = give[1:]
			p.move(g.id, g.from, hs)
		}
	}
}

// balanceSizes empties the draining hosts, largest shards first, onto the
// least loaded hosts, then moves shards from the most to the least loaded
// host while that brings both closer to the mean (at most n moves).
func (p *planner) balanceSizes(n int) {
	sizes := p.sizes
	least := func() *hostState {
		return slices.MinFunc(p.eligible, func(a, b *hostState) int {
			return cmp.Or(cmp.Compare(a.bytes, b.bytes), strings.Compare(a.name, b.name))
		})
	}
	for _, h := range p.hosts {
		hs := p.state[h.Name]
		if !hs.drain || !p.gives(hs) {
			continue
		}
		ids := slices.Clone(hs.shards)
		slices.SortStableFunc(ids, func(a, b int) int { return cmp.Or(cmp.Compare(sizes[b], sizes[a]), cmp.Compare(b, a)) })
		for _, id := range ids {
			p.move(id, hs, least())
		}
	}
	if len(p.only) > 0 {
		return // a drain: the other hosts stay as they are
	}
	var total, largest int64
	for _, hs := range p.eligible {
		total += hs.bytes
	}
	for _, s := range sizes {
		largest = max(largest, s)
	}
	mean := total / int64(len(p.eligible))
	tol := max(largest/2, 1)
	moved := map[int]bool{}
	for range n {
		most := slices.MaxFunc(p.eligible, func(a, b *hostState) int {
			return cmp.Or(cmp.Compare(a.bytes, b.bytes), strings.Compare(b.name, a.name))
		})
		to := least()
		if most.bytes <= mean+tol || most == to {
			break
		}
		// The shard that brings the two hosts closest to the mean, if any
		// brings them closer at all.
		spread := func(d, r int64) int64 { return abs64(d-mean) + abs64(r-mean) }
		best, bestSpread := -1, spread(most.bytes, to.bytes)
		for _, id := range most.shards {
			if moved[id] {
				continue
			}
			s := spread(most.bytes-sizes[id], to.bytes+sizes[id])
			if s < bestSpread || (s == bestSpread && best >= 0 && id > best) {
				best, bestSpread = id, s
			}
		}
		if best < 0 {
			break
		}
		moved[best] = true
		p.move(best, most, to)
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// check refuses what no plan can be made with: an unknown By or Mode.
func (o PlanOptions) check() error {
	if o.By != "" && o.By != ByCount && o.By != BySize {
		return fmt.Errorf("plan by %q: want count or size", o.By)
	}
	if o.Mode != "" && o.Mode != MoveOnline && o.Mode != MoveOffline && o.Mode != MoveAuto {
		return fmt.Errorf("plan mode %q: want online, offline or auto", o.Mode)
	}
	return nil
}

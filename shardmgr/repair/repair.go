package repair

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
)

var (
	// ErrHostsDisagree: the hosts' records do not say where a shard
	// lives (two hosts hold it live at the same generation, or none
	// does); see *ConflictError. Nothing was changed.
	ErrHostsDisagree = errors.New("the hosts' records do not agree")
	// ErrHostUnreadable: a host of the cluster file could not be read;
	// the map is rebuilt only from every host's record.
	ErrHostUnreadable = errors.New("host record unreadable")
	// ErrChangedSincePlan: the catalog or the hosts changed between the
	// plan that was shown and its application. Nothing was changed.
	ErrChangedSincePlan = errors.New("the catalog or the hosts changed since the plan")
)

// ShardChange is one shard the repair places anew.
type ShardChange struct {
	Shard int `json:"shard"`
	// From, FromSchema and FromState are the catalog's place for it.
	From       string `json:"from"`
	FromSchema string `json:"from_schema"`
	FromState  string `json:"from_state"`
	// To, Schema and State are where the hosts say it lives, and
	// Generation the generation its holder recorded.
	To         string `json:"to"`
	Schema     string `json:"schema"`
	State      string `json:"state"`
	Generation int64  `json:"generation"`
}

// Plan is what the repair changes in the catalog. JSON: {"cluster":...,
// "create_catalog":bool,"identity":"...","catalog_generation":N,"host_generation":N,"add_hosts":[...],
// "shards":[...],"close_moves":[...],"finish_moves":[...],
// "retired_copies":[...],"applied":bool,"generation":N}.
type Plan struct {
	Cluster string `json:"cluster"`
	// CreateCatalog: the catalog holds no cluster (emptied: its database
	// created again empty, or its schema dropped) while the hosts hold
	// the cluster's shards. The repair creates the cluster from their
	// records, with Identity, the cluster identity they record ("": none
	// does, the catalog makes one), and the hashes of their secrets.
	CreateCatalog bool   `json:"create_catalog"`
	Identity      string `json:"identity,omitempty"`
	// CatalogGeneration is the catalog's generation when planned;
	// HostGeneration the newest any host recorded.
	CatalogGeneration int64 `json:"catalog_generation"`
	HostGeneration    int64 `json:"host_generation"`
	// AddHosts are hosts of the cluster file whose database belongs to
	// the cluster that the catalog does not know.
	AddHosts []string      `json:"add_hosts"`
	Shards   []ShardChange `json:"shards"`
	// CloseMoves are unfinished moves in the catalog's journal of shards
	// the repair places anew elsewhere than the move's target: the hosts
	// say the move did not take the shard there, so they are closed
	// (aborted).
	CloseMoves []int64 `json:"close_moves"`
	// FinishMoves are unfinished moves in the catalog's journal of shards
	// the hosts hold live on the move's target: the move finished after
	// the backup was taken. They are journaled as finished, with the
	// retired copy they left on their source, so that rebalance cleanup
	// drops it once the move's keep period is over.
	FinishMoves []FinishedMove `json:"finish_moves"`
	// RetiredCopies are moved shards' retired copies on the hosts that the
	// catalog's journal does not list (moves made after the backup):
	// journaled, so that rebalance cleanup drops them, or with the DROP
	// to run by hand.
	RetiredCopies []RetiredCopy `json:"retired_copies"`
	// Applied: the catalog was changed, at Generation (above every
	// generation a host recorded).
	Applied    bool  `json:"applied"`
	Generation int64 `json:"generation"`
}

// Empty reports whether the catalog already agrees with the hosts.
func (p *Plan) Empty() bool {
	return !p.CreateCatalog && len(p.AddHosts) == 0 && len(p.Shards) == 0 && len(p.CloseMoves) == 0 && len(p.FinishMoves) == 0 &&
		len(p.RetiredCopies) == 0 && p.HostGeneration <= p.CatalogGeneration
}

// Conflict is a shard whose home the hosts' records do not settle.
type Conflict struct {
	Shard int `json:"shard"`
	// Hosts hold it live at Generation; none when no host does.
	Hosts      []string `json:"hosts"`
	Generation int64    `json:"generation,omitempty"`
}

// ConflictError lists the shards the repair cannot place. It wraps
// ErrHostsDisagree.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	parts := make([]string, 0, len(e.Conflicts))
	for _, c := range e.Conflicts {
		if len(c.Hosts) == 0 {
			parts = append(parts, fmt.Sprintf("shard %d: no host of the cluster file holds it", c.Shard))
			continue
		}
		parts = append(parts, fmt.Sprintf("shard %d: hosts %s both hold it live at generation %d", c.Shard, strings.Join(c.Hosts, " and "), c.Generation))
	}
	return fmt.Sprintf("%v: %s", ErrHostsDisagree, strings.Join(parts, "; "))
}

func (e *ConflictError) Unwrap() error { return ErrHostsDisagree }

// PlanFromHosts reads the catalog and every host of the cluster file and
// returns what FromHosts would change, changing nothing.
func PlanFromHosts(ctx context.Context, c *cluster.Cluster) (*Plan, error) {
	p, _, err := plan(ctx, c)
	return p, err
}

// FromHosts rebuilds the catalog's map from what the hosts record of
// themselves: each shard is placed on the host that holds its live copy at
// the newest generation, and hosts of the cluster file the catalog forgot
// are added. It changes the catalog only when the plan, read again, is
// want (the plan shown to the user; nil: whatever it is), in one catalog
// transaction whose new generation is above every generation a host
// recorded; then each holder records its shard at that generation. Two
// hosts holding one shard live at the same generation, or none holding
// it, are a *ConflictError, and a host that cannot be read is
// ErrHostUnreadable: nothing is changed.
func FromHosts(ctx context.Context, c *cluster.Cluster, want *Plan) (*Plan, error) {
	p, holders, err := plan(ctx, c)
	if err != nil {
		return nil, err
	}
	if want != nil && !samePlan(p, want) {
		return p, ErrChangedSincePlan
	}
	if p.Empty() {
		return p, nil
	}
	var gen int64
	if p.CreateCatalog {
		if gen, err = createCatalog(ctx, c, p); err != nil {
			return p, err
		}
	} else if gen, err = change(ctx, c, p); err != nil {
		return p, err
	}
	p.Applied, p.Generation = true, gen
	// The holders' records follow the catalog: each says its live copy is
	// there as of the repair's generation.
	for _, s := range p.Shards {
		hp, err := c.Host(ctx, s.To, shardmgr.UseWrite)
		if err == nil {
			err = shardschema.RecordLocalShard(ctx, hp, s.Shard, s.Schema, holders[s.Shard].State, gen)
		}
		if err != nil {
			return p, fmt.Errorf("catalog repaired at generation %d; host %s: record shard %d: %w", gen, s.To, s.Shard, err)
		}
	}
	if err := recordServers(ctx, c, p.AddHosts); err != nil {
		return p, fmt.Errorf("catalog repaired at generation %d; %w", gen, err)
	}
	return p, nil
}

// change applies plan p to a catalog that holds the cluster, in one
// catalog change above every generation a host recorded.
func change(ctx context.Context, c *cluster.Cluster, p *Plan) (int64, error) {
	pool, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return 0, err
	}
	cfg := c.Config()
	what := fmt.Sprintf("catalog repair from the hosts' records: %d shards placed anew, %d hosts added, %d moves finished, %d retired copies journaled, above host generation %d",
		len(p.Shards), len(p.AddHosts), len(p.FinishMoves), journaled(p.RetiredCopies), p.HostGeneration)
	return catalog.ChangeAbove(ctx, pool, p.CatalogGeneration, p.HostGeneration, what, func(tx pgx.Tx, gen int64) error {
		for _, name := range p.AddHosts {
			h, _ := cfg.Host(name)
			if err := catalog.InsertHost(ctx, tx, h, gen); err != nil {
				return fmt.Errorf("add host %s: %w", name, err)
			}
		}
		for _, s := range p.Shards {
			if err := catalog.PlaceShard(ctx, tx, gen, shardmgr.Shard{ID: s.Shard, Host: s.To, Schema: s.Schema, State: shardmgr.State(s.State)}); err != nil {
				return fmt.Errorf("shard %d: %w", s.Shard, err)
			}
		}
		if len(p.CloseMoves) > 0 {
			if err := catalog.JournalClosed(ctx, tx, p.CloseMoves, "closed by shardid catalog repair --from-hosts: the hosts' records place the shard"); err != nil {
				return fmt.Errorf("close moves: %w", err)
			}
		}
		if err := finishMoves(ctx, tx, p.FinishMoves); err != nil {
			return err
		}
		return journalRetired(ctx, tx, p.RetiredCopies)
	})
}

func samePlan(a, b *Plan) bool {
	return a.CreateCatalog == b.CreateCatalog && a.Identity == b.Identity && a.CatalogGeneration == b.CatalogGeneration && a.HostGeneration == b.HostGeneration &&
		slices.Equal(a.AddHosts, b.AddHosts) && slices.Equal(a.Shards, b.Shards) && slices.Equal(a.CloseMoves, b.CloseMoves) &&
		slices.Equal(a.FinishMoves, b.FinishMoves) && slices.Equal(a.RetiredCopies, b.RetiredCopies)
}

// plan is PlanFromHosts, with each placed shard's holder record.
func plan(ctx context.Context, c *cluster.Cluster) (*Plan, map[int]shardmgr.LocalShard, error) {
	cfg := c.Config()
	m, err := c.Map(ctx, shardmgr.UseWrite)
	empty := errors.Is(err, shardmgr.ErrNotInitialized)
	switch {
	case empty:
		m = emptyMap(cfg)
	case err != nil:
		return nil, nil, err
	}
	p := &Plan{Cluster: m.Cluster, CreateCatalog: empty, CatalogGeneration: m.Generation, AddHosts: []string{}, Shards: []ShardChange{}, CloseMoves: []int64{}, FinishMoves: []FinishedMove{}, RetiredCopies: []RetiredCopy{}}
	hosts := hostidentity.Read(ctx, c)
	var unreadable []error
	for _, h := range hosts {
		switch {
		case h.Err != nil:
			unreadable = append(unreadable, h.Err)
		case h.Cluster != "" && (h.Cluster != m.Cluster || h.As != h.Name):
			unreadable = append(unreadable, fmt.Errorf("host %s: %w: its database belongs to cluster %q as host %q", h.Name, shardmgr.ErrClusterMismatch, h.Cluster, h.As))
		}
	}
	if len(unreadable) > 0 {
		return nil, nil, fmt.Errorf("%w: %w", ErrHostUnreadable, errors.Join(unreadable...))
	}
	recs := hostidentity.Records(hosts, m.Cluster)
	if empty {
		if len(recs) == 0 {
			return nil, nil, fmt.Errorf("%w (and no host of the cluster file records it: nothing to rebuild the catalog from)", shardmgr.ErrNotInitialized)
		}
		if err := checkRecordsFit(cfg, recs); err != nil {
			return nil, nil, err
		}
	}
	type held struct {
		host string
		row  shardmgr.LocalShard
	}
	newest := map[int][]held{}
	for _, h := range cfg.Hosts { // the file's order: conflicts name hosts stably
		for _, l := range recs[h.Name] {
			p.HostGeneration = max(p.HostGeneration, l.Generation)
			if !l.Held() {
				continue
			}
			cur := newest[l.Shard]
			switch {
			case len(cur) == 0 || l.Generation > cur[0].row.Generation:
				newest[l.Shard] = []held{{h.Name, l}}
			case l.Generation == cur[0].row.Generation:
				newest[l.Shard] = append(cur, held{h.Name, l})
			}
		}
	}
	var conflicts []Conflict
	holders := map[int]shardmgr.LocalShard{}
	for _, s := range m.Shards {
		hs := newest[s.ID]
		switch {
		case len(hs) == 0:
			conflicts = append(conflicts, Conflict{Shard: s.ID, Hosts: []string{}})
			continue
		case len(hs) > 1:
			names := make([]string, len(hs))
			for i, x := range hs {
				names[i] = x.host
			}
			conflicts = append(conflicts, Conflict{Shard: s.ID, Hosts: names, Generation: hs[0].row.Generation})
			continue
		}
		h := hs[0]
		if h.host == s.Host && h.row.Schema == s.Schema {
			continue
		}
		state := shardmgr.State(h.row.State)
		if !state.Valid() || state == shardmgr.StateMoving {
			state = shardmgr.StateActive
		}
		holders[s.ID] = shardmgr.LocalShard{Shard: s.ID, Schema: h.row.Schema, State: string(state), Generation: h.row.Generation}
		p.Shards = append(p.Shards, ShardChange{Shard: s.ID, From: s.Host, FromSchema: s.Schema, FromState: string(s.State),
			To: h.host, Schema: h.row.Schema, State: string(state), Generation: h.row.Generation})
	}
	if len(conflicts) > 0 {
		return nil, nil, &ConflictError{Conflicts: conflicts}
	}
	for _, h := range cfg.Hosts {
		if _, ok := m.Host(h.Name); !ok {
			if _, initialised := recs[h.Name]; initialised {
				p.AddHosts = append(p.AddHosts, h.Name)
			}
		}
	}
	for _, s := range p.Shards {
		if _, ok := m.Host(s.To); !ok && !slices.Contains(p.AddHosts, s.To) {
			return nil, nil, fmt.Errorf("shard %d: host %s is not in the catalog and cannot be added", s.Shard, s.To)
		}
	}
	if empty {
		if p.Identity, err = hostsIdentity(ctx, c, p.AddHosts); err != nil {
			return nil, nil, err
		}
	}
	pool, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, nil, err
	}
	open, err := catalog.ReadOpenMoves(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	// The open moves of the shards placed anew end here: finished where
	// the hosts hold the shard live on the move's target (the move flipped
	// after the backup), aborted otherwise. The others stay open, for
	// their own resume, abort or cleanup.
	stillOpen := maps.Clone(open)
	for _, s := range p.Shards {
		mv, ok := open[s.Shard]
		if !ok {
			continue
		}
		delete(stillOpen, s.Shard)
		if s.To == mv.To {
			p.FinishMoves = append(p.FinishMoves, FinishedMove{Move: mv.ID, Shard: s.Shard, From: mv.From, To: mv.To, FlipGeneration: s.Generation})
		} else {
			p.CloseMoves = append(p.CloseMoves, mv.ID)
		}
	}
	slices.Sort(p.CloseMoves)
	if p.RetiredCopies, err = retiredCopies(ctx, c, pool, homesAfter(m, p), stillOpen); err != nil {
		return nil, nil, err
	}
	p.RetiredCopies = claimRetired(p.FinishMoves, p.RetiredCopies)
	return p, holders, nil
}

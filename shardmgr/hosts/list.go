package hosts

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// DefaultProbeTimeout bounds the probe of one host (connect and
// questions) unless ListOptions says: an unreachable host is a row of
// the listing, not a hang.
const DefaultProbeTimeout = 20 * time.Second

// Host states in a listing.
const (
	StateOK          = "ok"
	StateDraining    = "draining"
	StateUnreachable = "unreachable"
)

// Host is one host as List finds it. JSON:
// {"name":"pg1","dsn":"...","shards":N,"ranges":"0-5","state":"ok","drain":false,"server":{...}|null,"error":"..."}.
type Host struct {
	Name string `json:"name"`
	// DSN is the host's DSN without its password (as the catalog records
	// it).
	DSN string `json:"dsn"`
	// Shards counts the shards the catalog places on the host; Ranges
	// lists them ("0-5,9").
	Shards int    `json:"shards"`
	Ranges string `json:"ranges"`
	// State is ok, draining (marked to give its shards away) or
	// unreachable (Error says why). A server that answers but refuses a
	// question (a role without the privilege) is ok or draining, with
	// what it answered in Server and the refusal in Error.
	State string `json:"state"`
	Drain bool   `json:"drain"`
	// Mismatch says how the cluster file and the catalog differ on this
	// host ("" when they agree): init or a host command settles it.
	Mismatch string `json:"mismatch,omitempty"`
	// Server is what the server said; nil when it could not be reached.
	Server *Server `json:"server"`
	Error  string  `json:"error,omitempty"`
}

// ListOptions adjust List.
type ListOptions struct {
	// ProbeTimeout bounds each host's probe. Zero means
	// DefaultProbeTimeout (20s).
	ProbeTimeout time.Duration
}

// List returns the hosts of the cluster file, in its order, then those
// only the catalog has, each probed at once (at most opts.ProbeTimeout
// each): a host that does not answer is a row in state unreachable, not
// an error. It changes nothing.
func List(ctx context.Context, c *cluster.Cluster, opts ListOptions) ([]Host, error) {
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	cfg := c.Config()
	m, err := c.Map(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	mismatch := map[string]string{}
	for _, d := range catalog.CompareHosts(m, cfg) {
		mismatch[d.Name] = d.Describe(cfg)
	}
	var out []Host
	add := func(name, dsn string, drain bool) {
		ids := m.ShardsOn(name)
		out = append(out, Host{Name: name, DSN: dsn, Drain: drain, Shards: len(ids), Ranges: shardmgr.FormatShardList(ids), Mismatch: mismatch[name]})
	}
	for _, h := range cfg.Hosts {
		add(h.Name, h.CatalogDSN(), h.Drain)
	}
	for _, ch := range m.Hosts {
		if _, ok := cfg.Host(ch.Name); !ok {
			add(ch.Name, ch.DSN, ch.Drain)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for i := range out {
		h := &out[i]
		g.Go(func() error {
			s, err := probe(gctx, c, h.Name, opts.ProbeTimeout)
			h.Server = s
			if err != nil {
				h.Error = pg.OneLine(err)
			}
			switch {
			case s == nil:
				h.State = StateUnreachable
			case h.Drain:
				h.State = StateDraining
			default:
				h.State = StateOK
			}
			return nil
		})
	}
	g.Wait()
	if err := nameMoves(ctx, c, out); err != nil {
		return nil, err
	}
	return out, nil
}

// nameMoves gives each move slot the hosts reported the open moves of the
// catalog it carries (by their replication names, the mark tables of the
// slot's publication): a batch's slot becomes one entry per move.
func nameMoves(ctx context.Context, c *cluster.Cluster, hs []Host) error {
	var names []string
	for _, h := range hs {
		if h.Server != nil {
			for _, m := range h.Server.Moves {
				names = append(names, m.marks...)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	cat, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return err
	}
	type open struct {
		id    int64
		shard int
		to    string
	}
	byName := map[string]open{}
	rows, err := cat.Query(ctx, `SELECT repl_name, id, shard, to_host FROM shardid.moves
		WHERE repl_name = ANY($1) AND phase NOT IN ('cleaned', 'aborted')`, names)
	if err != nil {
		return fmt.Errorf("catalog: read the moves' journal: %w", err)
	}
	var (
		name string
		o    open
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &o.id, &o.shard, &o.to}, func() error { byName[name] = o; return nil }); err != nil {
		return fmt.Errorf("catalog: read the moves' journal: %w", err)
	}
	for i := range hs {
		s := hs[i].Server
		if s == nil || len(s.Moves) == 0 {
			continue
		}
		var named []MoveReplication
		for _, m := range s.Moves {
			found := false
			for _, mark := range m.marks {
				if o, ok := byName[mark]; ok {
					e := m
					e.ID, e.Shard, e.To, e.marks = o.id, o.shard, o.to, nil
					named = append(named, e)
					found = true
				}
			}
			if !found {
				m.marks = nil
				named = append(named, m) // a slot no open move names: shown as such
			}
		}
		s.Moves = named
	}
	return nil
}

// probe asks host name's server who it is, within timeout.
func probe(ctx context.Context, c *cluster.Cluster, name string, timeout time.Duration) (*Server, error) {
	if _, ok := c.Config().Host(name); !ok {
		return nil, fmt.Errorf("not in the cluster file %s: its DSN there (with the password) is unknown", c.Config().Path)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := c.HostPool(ctx, name, cluster.Session{Application: "shardid host list"})
	if err != nil {
		return nil, err
	}
	conn, err := p.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		return nil, err
	}
	defer conn.Release()
	s, err := identify(ctx, conn)
	if s == nil && err != nil {
		// Connected: what it said so far, and the refusal.
		s = &Server{}
	}
	return s, err
}

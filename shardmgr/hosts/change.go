package hosts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/engine/clusterfile"
)

// ChangeResult is what SetDrain or Remove did. JSON:
// {"host":"pg3","changed":true,"catalog":true,"file":true,"generation":N}.
type ChangeResult struct {
	Host string `json:"host"`
	// Changed is false when there was nothing to do.
	Changed bool `json:"changed"`
	// Catalog and File say where the host was changed.
	Catalog bool `json:"catalog"`
	File    bool `json:"file"`
	// Generation is the catalog's generation after the change.
	Generation int64 `json:"generation"`
	// Config is the cluster file as it reads now.
	Config *shardmgr.Config `json:"-"`
}

// SetDrain marks host name draining (drain true) or not, in the catalog
// and the cluster file (drain: true under the host, as an operator would
// write it). Draining, it takes no shards and gives its own away at the
// next rebalance; rebalance.PlanOptions.Only plans just that. c keeps the
// cluster file it was opened with; the result's Config is the file now.
func SetDrain(ctx context.Context, c *cluster.Cluster, name string, drain bool) (*ChangeResult, error) {
	cfg := c.Config()
	if _, ok := cfg.Host(name); !ok {
		return nil, fmt.Errorf("host %s: %w (not in the cluster file %s)", name, shardmgr.ErrUnknownHost, cfg.Path)
	}
	edit, err := clusterfile.SetHost(cfg.Path, name, "drain", strconv.FormatBool(drain), os.LookupEnv)
	if err != nil {
		return nil, err
	}
	cat, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	res := &ChangeResult{Host: name, Config: edit.Config}
	what := fmt.Sprintf("host %s: drain %t", name, drain)
	done, err := change(ctx, cat, 0, edit, func(tx pgx.Tx, m *shardmgr.ShardMap) (string, error) {
		ch, ok := m.Host(name)
		if !ok {
			return "", fmt.Errorf("host %s: %w (in the cluster file, not in the catalog: run init)", name, shardmgr.ErrUnknownHost)
		}
		if ch.Drain == drain {
			return "", nil
		}
		return what, catalog.SetHostDrain(ctx, tx, name, drain)
	})
	if err != nil {
		return nil, err
	}
	done.applyTo(res)
	return res, nil
}

// Remove takes host name out of the catalog and the cluster file, once it
// holds no shard, takes part in no unfinished move and keeps no moved
// shard's retired copy: otherwise an error wrapping ErrHostInUse names
// them, and nothing changes. The server and its database are left as
// they are (shardid never drops them). A host only the file or only the
// catalog has is taken out of the one that has it.
func Remove(ctx context.Context, c *cluster.Cluster, name string) (*ChangeResult, error) {
	cfg := c.Config()
	cat, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	var edit *clusterfile.Edit
	res := &ChangeResult{Host: name, Config: cfg}
	if _, ok := cfg.Host(name); ok {
		if edit, err = clusterfile.RemoveHost(cfg.Path, name, os.LookupEnv); err != nil {
			return nil, err
		}
		res.Config = edit.Config
	}
	done, err := change(ctx, cat, 0, edit, func(tx pgx.Tx, m *shardmgr.ShardMap) (string, error) {
		if _, ok := m.Host(name); !ok {
			if edit == nil {
				return "", fmt.Errorf("host %s: %w (neither in the cluster file %s nor in the catalog)", name, shardmgr.ErrUnknownHost, cfg.Path)
			}
			return "", nil
		}
		if err := inUse(ctx, tx, m, name); err != nil {
			return "", err
		}
		return "remove host " + name, catalog.RemoveHost(ctx, tx, name)
	})
	if err != nil {
		return nil, err
	}
	done.applyTo(res)
	return res, nil
}

// inUse refuses a host that holds shards or that moves still involve,
// naming them.
func inUse(ctx context.Context, tx pgx.Tx, m *shardmgr.ShardMap, name string) error {
	var why []string
	if ids := m.ShardsOn(name); len(ids) > 0 {
		why = append(why, fmt.Sprintf("it holds %d shards (%s): drain it first", len(ids), shardmgr.FormatShardList(ids)))
	}
	moves, err := catalog.HostMoves(ctx, tx, name)
	if err != nil {
		return err
	}
	open, kept := describeMoves(moves)
	if len(open) > 0 {
		why = append(why, fmt.Sprintf("unfinished moves involve it: %s: finish or abort them", summarize(open)))
	}
	if len(kept) > 0 {
		why = append(why, fmt.Sprintf("it keeps the retired copies of %s: drop them", summarize(kept)))
	}
	if len(why) > 0 {
		return fmt.Errorf("host %s: %w: %s", name, ErrHostInUse, strings.Join(why, "; "))
	}
	return nil
}

// changed is what a change did: the catalog's generation afterwards, and
// where the host changed.
type changed struct {
	Generation    int64
	Catalog, File bool
}

// summarizeFirst is how many moves an error names before it counts the
// rest: a host that kept 256 retired copies was refused in one line of
// 256 moves.
const summarizeFirst = 3

// summarize joins the first summarizeFirst of items and counts the rest.
func summarize(items []string) string {
	if len(items) <= summarizeFirst {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more (%d in all)", strings.Join(items[:summarizeFirst], ", "), len(items)-summarizeFirst, len(items))
}

// describeMoves names catalog.HostMoves' moves for a refusal: the
// unfinished ones (with their phase) and those that keep a retired copy.
func describeMoves(moves []catalog.HostMove) (open, kept []string) {
	for _, mv := range moves {
		s := fmt.Sprintf("move %d (shard %d, %s -> %s)", mv.ID, mv.Shard, mv.From, mv.To)
		if mv.Retained {
			kept = append(kept, s)
		} else {
			open = append(open, s+" at "+string(mv.Phase))
		}
	}
	return open, kept
}

// change runs fn in one catalog change on the map as the transaction sees
// it (want: the generation it must still be at, 0 for any), and writes
// edit (if any) as the change's last step: the catalog and the file
// change together, or neither does (a commit that fails after the file
// was written puts the file back). fn returns what it changed, "" for
// nothing. Every host change goes through here: SetDrain, Remove, SetDSN
// and Failover.
func change(ctx context.Context, cat *pgxpool.Pool, want int64, edit *clusterfile.Edit, fn func(tx pgx.Tx, m *shardmgr.ShardMap) (string, error)) (changed, error) {
	var out changed
	written := false
	gen, bumped, err := catalog.ChangeIf(ctx, cat, want, func(tx pgx.Tx, _ int64) (string, error) {
		m, err := shardmgr.ReadMap(ctx, tx)
		if err != nil {
			return "", err
		}
		what, err := fn(tx, m)
		if err != nil {
			return "", err
		}
		if edit != nil && edit.Changes() {
			// Last, so that a failed change leaves the file alone.
			written = true
			if err := edit.Write(); err != nil {
				return "", err
			}
			out.File = true
		}
		// what == "": the file alone changed, or nothing; the generation
		// stays.
		return what, nil
	})
	if err != nil {
		if written {
			err = errors.Join(err, edit.Undo())
		}
		return changed{}, err
	}
	out.Generation, out.Catalog = gen, bumped
	return out, nil
}

// applyTo copies what a change did into res.
func (c changed) applyTo(res *ChangeResult) {
	res.Generation, res.Catalog, res.File = c.Generation, c.Catalog, c.File
	res.Changed = c.Catalog || c.File
}

// WithDrain is a copy of cfg in which host name is marked drain, for a
// plan of its drain that changes nothing (rebalance.PlanRebalance with
// PlanOptions.Only); shardmgr.ErrUnknownHost when cfg has no such host.
func WithDrain(cfg *shardmgr.Config, name string) (*shardmgr.Config, error) {
	out := *cfg
	out.Hosts = slices.Clone(cfg.Hosts)
	for i := range out.Hosts {
		if out.Hosts[i].Name == name {
			out.Hosts[i].Drain = true
			return &out, nil
		}
	}
	return nil, fmt.Errorf("host %s: %w (not in the cluster file %s)", name, shardmgr.ErrUnknownHost, cfg.Path)
}

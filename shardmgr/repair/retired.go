package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// RetiredCopy is a moved shard's retired copy on a host
// (shard_NNNN_moved_gG) that the catalog's journal does not list: a move
// made after the backup the catalog was restored from kept it. rebalance
// cleanup drops only the copies the journal lists, so the repair journals
// it (Journal) as a finished move from Host to the shard's home whose keep
// period is over; where that cannot be (the shard lives on Host again),
// Drop is the statement to run on Host by hand once the copy is not
// wanted.
type RetiredCopy struct {
	Host   string `json:"host"`
	Shard  int    `json:"shard"`
	Schema string `json:"schema"`
	// To is the shard's home after the repair.
	To      string `json:"to"`
	Journal bool   `json:"journal"`
	Drop    string `json:"drop,omitempty"`
}

// retiredCopies finds on every host of the cluster file the retired
// copies the journal does not list, for shards whose home after the
// repair is homes[shard]. A shard with a move that stays open (open) is
// left to that move (its cleanup renames and journals its own copy).
func retiredCopies(ctx context.Context, c *cluster.Cluster, q pg.Querier, homes map[int]string, open map[int]catalog.OpenMove) ([]RetiredCopy, error) {
	known, err := catalog.JournaledRetired(ctx, q)
	if err != nil && !pg.IsUndefinedTable(err) {
		return nil, fmt.Errorf("catalog: read the journal's retired copies: %w", err)
	}
	out := []RetiredCopy{}
	for _, h := range c.Config().Hosts {
		p, err := c.HostPool(ctx, h.Name, cluster.Session{})
		if err != nil {
			return nil, fmt.Errorf("%w: host %s: %w", ErrHostUnreadable, h.Name, err)
		}
		found, err := fence.ReadRetired(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%w: host %s: %w", ErrHostUnreadable, h.Name, err)
		}
		for schema, rc := range found {
			if known[h.Name][schema] {
				continue
			}
			if _, moving := open[rc.Shard]; moving {
				continue
			}
			home, ok := homes[rc.Shard]
			if !ok {
				continue // a shard the cluster does not have: verify's business
			}
			r := RetiredCopy{Host: h.Name, Shard: rc.Shard, Schema: schema, To: home, Journal: home != h.Name}
			if !r.Journal {
				r.Drop = "DROP SCHEMA " + pgx.Identifier{schema}.Sanitize() + " CASCADE"
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b RetiredCopy) int {
		return strings.Compare(a.Host+"/"+a.Schema, b.Host+"/"+b.Schema)
	})
	return out, nil
}

// journalRetired records each copy of rs that can be journaled, inside
// the repair's catalog change.
func journalRetired(ctx context.Context, tx pgx.Tx, rs []RetiredCopy) error {
	for _, r := range rs {
		if !r.Journal {
			continue
		}
		schema, _, _ := strings.Cut(r.Schema, "_moved_g")
		if err := catalog.JournalRetired(ctx, tx, catalog.LostRetired{
			Shard: r.Shard, Schema: schema, Retired: r.Schema, From: r.Host, To: r.To,
			FlipGeneration: max(retiredGeneration(r.Schema), 0),
			Why:            "journaled by shardid catalog repair --from-hosts: a retired copy the restored journal did not list",
		}); err != nil {
			return fmt.Errorf("journal retired copy %s on %s: %w", r.Schema, r.Host, err)
		}
	}
	return nil
}

// homesAfter is each shard's home once plan p is applied to m.
func homesAfter(m *shardmgr.ShardMap, p *Plan) map[int]string {
	homes := make(map[int]string, len(m.Shards))
	for _, s := range m.Shards {
		homes[s.ID] = s.Host
	}
	for _, s := range p.Shards {
		homes[s.Shard] = s.To
	}
	return homes
}

func journaled(rs []RetiredCopy) int {
	n := 0
	for _, r := range rs {
		if r.Journal {
			n++
		}
	}
	return n
}

// FinishedMove is an unfinished move of the restored journal that the
// hosts show finished: its shard lives on its target. The repair
// journals it as finished (cleaned), with Retired, the retired copy it
// left on its source (none when the move kept none), whose keep period
// (the move's own) runs from the repair.
type FinishedMove struct {
	Move  int64  `json:"move"`
	Shard int    `json:"shard"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Retired is the retired copy on From ("" when there is none), and
	// FlipGeneration the generation of the flip: Retired's, or the one the
	// target recorded.
	Retired        string `json:"retired,omitempty"`
	FlipGeneration int64  `json:"flip_generation"`
}

// claimRetired gives each finished move of fs the newest retired copy of
// its shard on its source among rs, and returns the copies left to be
// journaled on their own.
func claimRetired(fs []FinishedMove, rs []RetiredCopy) []RetiredCopy {
	for i := range fs {
		best, bestGen := -1, int64(-1)
		for j, r := range rs {
			if r.Host != fs[i].From || r.Shard != fs[i].Shard {
				continue
			}
			if gen := retiredGeneration(r.Schema); gen > bestGen {
				best, bestGen = j, gen
			}
		}
		if best < 0 {
			continue
		}
		fs[i].Retired, fs[i].FlipGeneration = rs[best].Schema, bestGen
		rs = slices.Delete(rs, best, best+1)
	}
	return rs
}

// finishMoves journals each move of fs as finished, inside the repair's
// catalog change.
func finishMoves(ctx context.Context, tx pgx.Tx, fs []FinishedMove) error {
	for _, f := range fs {
		err := catalog.JournalFinished(ctx, tx, catalog.FinishedMove{
			ID: f.Move, Retired: f.Retired, FlipGeneration: f.FlipGeneration,
			Why: "finished after the backup the catalog was restored from (its shard lives on the target): journaled by shardid catalog repair --from-hosts",
		})
		if errors.Is(err, catalog.ErrMoveNotOpen) {
			return fmt.Errorf("move %d: %w (it is no longer open)", f.Move, ErrChangedSincePlan)
		}
		if err != nil {
			return fmt.Errorf("finish move %d: %w", f.Move, err)
		}
	}
	return nil
}

// retiredGeneration is the flip generation in a retired copy's name
// (shard_NNNN_moved_gG); -1 when it carries none.
func retiredGeneration(schema string) int64 {
	_, g, ok := strings.Cut(schema, "_moved_g")
	if !ok {
		return -1
	}
	gen, err := strconv.ParseInt(g, 10, 64)
	if err != nil {
		return -1
	}
	return gen
}

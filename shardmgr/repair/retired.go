package repair

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/catalog"
	"github.com/shardid/shardid/shardmgr/internal/fence"
	"github.com/shardid/shardid/shardmgr/internal/pg"
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
// repair is homes[shard]. A shard with an open move is left to that move
// (its cleanup renames and journals its own copy).
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
		var gen int64
		schema, _, _ := strings.Cut(r.Schema, "_moved_g")
		fmt.Sscanf(r.Schema[len(schema)+len("_moved_g"):], "%d", &gen)
		if err := catalog.JournalRetired(ctx, tx, r.Shard, schema, r.Schema, r.Host, r.To, gen,
			"journaled by shardid catalog repair --from-hosts: a retired copy the restored journal did not list"); err != nil {
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

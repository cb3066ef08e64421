package install

// The catalog's side of init: the cluster created once, and the hosts the
// cluster file adds recorded, in one transaction that bumps the
// generation when something changed.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	shsql "github.com/shardid/shardid/sql"
)

// planCatalog creates the cluster in the catalog, or checks it against cfg
// and records what cfg adds (hosts) through catalog.ChangeIf: one
// transaction holding the catalog's cluster row that bumps the generation when
// something changed.
func planCatalog(ctx context.Context, pool *pgxpool.Pool, cfg *shardmgr.Config) (m *shardmgr.ShardMap, created bool, changes []string, err error) {
	// Init holds the init lock, so no other manager creates the cluster
	// meanwhile; the loop only covers a catalog created between the two
	// transactions by a manager that did not take it.
	for range 2 {
		_, _, err = catalog.ChangeIf(ctx, pool, 0, func(tx pgx.Tx, gen int64) (string, error) {
			cur, err := shardmgr.ReadMap(ctx, tx)
			if err != nil {
				return "", err
			}
			changes, err = reconcileCatalog(ctx, tx, cfg, cur, gen)
			return strings.Join(changes, "; "), err
		})
		if !errors.Is(err, shardmgr.ErrNotInitialized) {
			break
		}
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := catalog.LockToCreate(ctx, tx, pool); !errors.Is(err, shardmgr.ErrNotInitialized) {
				return err // created meanwhile (nil: reconcile it), or unreadable
			}
			created = true
			return createCluster(ctx, tx, cfg)
		})
		if err != nil || created {
			break
		}
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("catalog: %w", err)
	}
	m, err = shardmgr.ReadMap(ctx, pool)
	if err != nil {
		return nil, false, nil, err
	}
	return m, created, changes, nil
}

func createCluster(ctx context.Context, tx pgx.Tx, cfg *shardmgr.Config) error {
	const gen = 1
	shards := make([]shardmgr.Shard, 0, cfg.Shards)
	for i, r := range balancedRanges(cfg.Shards, len(cfg.Hosts)) {
		for id := r[0]; id < r[1]; id++ {
			shards = append(shards, shardmgr.Shard{ID: id, Schema: shsql.DefaultSchema(id), Host: cfg.Hosts[i].Name, State: shardmgr.StateActive})
		}
	}
	return catalog.CreateCluster(ctx, tx, cfg, "", gen, cfg.Hosts, shards,
		fmt.Sprintf("init cluster %s: %d shards on %d hosts", cfg.Cluster, cfg.Shards, len(cfg.Hosts)))
}

// balancedRanges splits shards 0..n-1 into h contiguous [from, to) ranges
// whose sizes differ by at most one, the larger ones first.
func balancedRanges(n, h int) [][2]int {
	out := make([][2]int, h)
	from := 0
	for i := range out {
		size := n / h
		if i < n%h {
			size++
		}
		out[i] = [2]int{from, from + size}
		from += size
	}
	return out
}

// reconcileCatalog checks cfg against an initialised catalog and records
// what cfg adds: new hosts, changed DSNs or drain flags. What is fixed once
// initialised must match.
func reconcileCatalog(ctx context.Context, tx pgx.Tx, cfg *shardmgr.Config, cur *shardmgr.ShardMap, gen int64) ([]string, error) {
	var bad []string
	if cur.Cluster != cfg.Cluster {
		bad = append(bad, fmt.Sprintf("the catalog holds cluster %q, the file names %q", cur.Cluster, cfg.Cluster))
	}
	if len(cur.Shards) != cfg.Shards {
		bad = append(bad, fmt.Sprintf("the catalog has %d shards, the file says %d (fixed once initialised)", len(cur.Shards), cfg.Shards))
	}
	if cfg.EpochMS != 0 && cfg.EpochMS != cur.Layout.Epoch {
		bad = append(bad, fmt.Sprintf("the catalog's epoch_ms is %d, the file says %d (fixed once initialised)", cur.Layout.Epoch, cfg.EpochMS))
	}
	// A host gone from the file leaves the catalog once it holds nothing:
	// no shard (drain it first) and no unfinished move, whose retired copy
	// would otherwise be left where no command looks (rebalance cleanup).
	diffs := catalog.CompareHosts(cur, cfg)
	var removed []string
	inUse := false
	for _, d := range diffs {
		if d.Kind != catalog.HostRemoved {
			continue
		}
		ch := d
		if n := len(cur.ShardsOn(ch.Name)); n > 0 {
			bad = append(bad, fmt.Sprintf("host %s holds %d shards in the catalog but is not in the file", ch.Name, n))
			inUse = true
			continue
		}
		moves, err := catalog.HostMoves(ctx, tx, ch.Name)
		if err != nil {
			return nil, err
		}
		if open := len(moves); open > 0 {
			bad = append(bad, fmt.Sprintf("host %s is not in the file but %d moves involving it are unfinished or keep a retired copy there", ch.Name, open))
			inUse = true
			continue
		}
		removed = append(removed, ch.Name)
	}
	if len(bad) > 0 {
		if inUse {
			return nil, fmt.Errorf("%w: %w: %s", shardmgr.ErrClusterMismatch, ErrHostInUse, strings.Join(bad, "; "))
		}
		return nil, fmt.Errorf("%w: %s", shardmgr.ErrClusterMismatch, strings.Join(bad, "; "))
	}
	var changes []string
	for _, name := range removed {
		changes = append(changes, fmt.Sprintf("remove host %s", name))
	}
	for _, d := range diffs {
		switch d.Kind {
		case catalog.HostAdded:
			changes = append(changes, fmt.Sprintf("add host %s", d.Name))
		case catalog.HostDSN:
			changes = append(changes, fmt.Sprintf("host %s: new DSN", d.Name))
		case catalog.HostDrain:
			h, _ := cfg.Host(d.Name)
			changes = append(changes, fmt.Sprintf("host %s: drain %t", d.Name, h.Drain))
		}
	}
	if len(changes) == 0 {
		return nil, nil
	}
	for _, name := range removed {
		if err := catalog.RemoveHost(ctx, tx, name); err != nil {
			return nil, err
		}
	}
	for _, h := range cfg.Hosts {
		if err := catalog.PutHost(ctx, tx, h, gen); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

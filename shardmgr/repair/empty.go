package repair

// An emptied catalog: its database created again empty after a failed
// restore, or its schema shardid dropped, while the hosts hold the
// cluster's shards. init refuses it (install.ErrCatalogEmpty): it would
// place the shards anew beside the hosts' copies. The repair rebuilds it
// from the hosts' records as it brings an older catalog up to them: the
// plan is the same (every shard placed anew from nowhere, every host
// that records the cluster added), and the catalog's cluster is created
// with the identity the hosts record, so that they still know it as
// theirs, and with the hashes of the secrets they hold, so that set-dsn
// and failover still prove them.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
)

// emptyMap is the map of a catalog that holds no cluster, for the plan:
// the cluster file's shards, placed nowhere, and no host.
func emptyMap(cfg *shardmgr.Config) *shardmgr.ShardMap {
	m := &shardmgr.ShardMap{Cluster: cfg.Cluster, Shards: make([]shardmgr.Shard, cfg.Shards)}
	for i := range m.Shards {
		m.Shards[i] = shardmgr.Shard{ID: i}
	}
	return m
}

// checkRecordsFit refuses host records of shards the cluster file does
// not have: the file's shard count, which the rebuilt catalog takes, is
// not the cluster's.
func checkRecordsFit(cfg *shardmgr.Config, recs map[string][]shardmgr.LocalShard) error {
	var bad []string
	for _, h := range cfg.Hosts {
		for _, l := range recs[h.Name] {
			if l.Shard >= cfg.Shards {
				bad = append(bad, fmt.Sprintf("host %s records shard %d", h.Name, l.Shard))
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the cluster file %s has %d shards, but %s", shardmgr.ErrClusterMismatch, cfg.Path, cfg.Shards, strings.Join(bad, "; "))
}

// hostsIdentity is the cluster identity the hosts names record: one, or
// "" when none records any (hosts of an older binary: the catalog makes
// one, and init writes it to them). Hosts that record different ones
// stop the repair.
func hostsIdentity(ctx context.Context, c *cluster.Cluster, names []string) (string, error) {
	by := map[string][]string{}
	for _, name := range names {
		p, err := c.Host(ctx, name, shardmgr.UseWrite)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrHostUnreadable, pg.OnHost(name, err))
		}
		id, err := hostidentity.ReadIdentity(ctx, p)
		if err != nil {
			return "", fmt.Errorf("%w: host %s: read its cluster identity: %w", ErrHostUnreadable, name, err)
		}
		if id != "" {
			by[id] = append(by[id], name)
		}
	}
	ids := slices.Sorted(maps.Keys(by))
	switch len(ids) {
	case 0:
		return "", nil
	case 1:
		return ids[0], nil
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s records identity %s", strings.Join(by[id], " and "), id)
	}
	return "", fmt.Errorf("%w: hosts of one cluster record different cluster identities: %s", ErrHostsDisagree, strings.Join(parts, "; "))
}

// createCatalog applies plan p to a catalog that holds no cluster: the
// catalog's schema migrated up (after the trust check init makes), then
// one transaction that creates the cluster with the hosts' identity, the
// hosts that record it with the hashes of their secrets, the shards where
// the hosts hold them, and the retired copies journaled, at a generation
// above every generation a host recorded. A cluster created meanwhile is
// ErrChangedSincePlan.
func createCatalog(ctx context.Context, c *cluster.Cluster, p *Plan) (int64, error) {
	cfg := c.Config()
	conn, err := c.CatalogConn(ctx, cluster.Session{})
	if err != nil {
		return 0, err
	}
	err = pgtrust.Check(ctx, conn, migrations.Schema)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	mc, err := c.CatalogConnConfig(cluster.Session{})
	if err != nil {
		return 0, err
	}
	if err := migrations.UpConfig(ctx, mc, migrations.Catalog, migrations.WithLogger(c.Logger())); err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	// The secrets' hashes, read before the catalog's transaction: a host
	// that holds none (an older binary's) gets one from the next init.
	hashes := map[string][]byte{}
	hosts := make([]shardmgr.Host, 0, len(p.AddHosts))
	for _, name := range p.AddHosts {
		h, _ := cfg.Host(name)
		hosts = append(hosts, h)
		hp, err := c.Host(ctx, name, shardmgr.UseWrite)
		if err != nil {
			return 0, pg.OnHost(name, err)
		}
		secret, err := hostidentity.ReadSecret(ctx, hp)
		if err != nil {
			return 0, fmt.Errorf("host %s: read its secret: %w", name, err)
		}
		if secret != nil {
			hashes[name] = hostidentity.Hash(secret)
		}
	}
	shards := make([]shardmgr.Shard, cfg.Shards)
	for _, s := range p.Shards {
		shards[s.Shard] = shardmgr.Shard{ID: s.Shard, Schema: s.Schema, Host: s.To, State: shardmgr.State(s.State)}
	}
	gen := p.HostGeneration + 1
	what := fmt.Sprintf("catalog repair from the hosts' records: the emptied catalog rebuilt, %d shards on %d hosts, %d retired copies journaled, above host generation %d",
		len(p.Shards), len(p.AddHosts), journaled(p.RetiredCopies), p.HostGeneration)
	pool, err := c.CatalogPool(ctx)
	if err != nil {
		return 0, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := catalog.LockToCreate(ctx, tx, pool); !errors.Is(err, shardmgr.ErrNotInitialized) {
			if err == nil {
				return fmt.Errorf("%w (a cluster was created in the catalog meanwhile)", ErrChangedSincePlan)
			}
			return err
		}
		if err := catalog.CreateCluster(ctx, tx, cfg, p.Identity, gen, hosts, shards, what); err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(hashes)) {
			if err := catalog.PutHostSecretHash(ctx, tx, name, hashes[name]); err != nil {
				return fmt.Errorf("host %s: record its secret's hash: %w", name, err)
			}
		}
		return journalRetired(ctx, tx, p.RetiredCopies)
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: %w", err)
	}
	return gen, nil
}

// recordServers records, for each host the repair added, what its server
// says of itself (system identifier, timeline), as init does for a new
// host: set-dsn and failover compare a host's server with it. A role that
// may not read it leaves it to init's warning.
func recordServers(ctx context.Context, c *cluster.Cluster, names []string) error {
	cat, err := c.CatalogPool(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		hp, err := c.HostPool(ctx, name, cluster.Session{})
		if err != nil {
			return err
		}
		t0 := time.Now()
		id, err := pg.ReadServerIdentity(ctx, hp)
		if errors.Is(err, pg.ErrIdentityDenied) {
			continue
		}
		if err != nil {
			return pg.OnHost(name, err)
		}
		if _, err := catalog.RecordHostIdentity(ctx, cat, name, id, pg.ClockAhead(t0, id.Now)); err != nil {
			return fmt.Errorf("catalog: host %s: record its identity: %w", name, err)
		}
	}
	return nil
}

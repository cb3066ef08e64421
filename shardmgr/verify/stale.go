package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
)

// checkCatalogStale compares the map with every scanned host's own record
// (shardmgr.CompareHostRecords): a catalog restored from an older backup
// places shards on hosts whose copies were retired since, and its
// generation is behind what the hosts recorded. Hosts that were not
// scanned, or whose record names another cluster or host, are not judged
// (the host check reports them).
func (v *verifier) checkCatalogStale() {
	recs := map[string][]shardmgr.LocalShard{}
	for _, h := range v.cfg.Hosts {
		hs := v.hosts[h.Name]
		if hs == nil || !hs.ok || hs.infoCluster != v.m.Cluster || hs.infoHost != hs.name {
			continue
		}
		recs[hs.name] = hs.local
	}
	e := shardmgr.CompareHostRecords(v.m, recs)
	if e == nil {
		return
	}
	if e.HostGeneration > e.Generation {
		v.problemFix(FixRepairCatalog, CheckCatalogStale, -1, e.Host,
			"the catalog is at generation %d but this host recorded generation %d: the catalog is older than the hosts (restored from an older backup?)", e.Generation, e.HostGeneration)
	}
	for _, s := range e.Shards {
		if s.Holder != "" {
			v.problemFix(FixRepairCatalog, CheckCatalogStale, s.Shard, s.CatalogHost,
				"the catalog places shard %d here, but %s holds it live at generation %d (catalog generation %d)", s.Shard, s.Holder, s.HolderGeneration, e.Generation)
			continue
		}
		v.problemFix(FixRepairCatalog, CheckCatalogStale, s.Shard, s.CatalogHost,
			"the catalog places shard %d here, but the host does not record it and no other host holds it live", s.Shard)
	}
}

// hostsHoldingCluster says which hosts of the cluster file record shards
// of this cluster ("" when none does, or none could be read): a catalog
// that holds no cluster while they do was emptied (a failed restore), and
// the repair rebuilds it from them; init refuses it.
func (v *verifier) hostsHoldingCluster(ctx context.Context) string {
	var parts []string
	for _, h := range hostidentity.Read(ctx, v.c) {
		if h.Err != nil || h.Cluster != v.cfg.Cluster || h.As != h.Name {
			continue
		}
		held := 0
		for _, l := range h.Shards {
			if l.Held() {
				held++
			}
		}
		shards := "shards"
		if held == 1 {
			shards = "shard"
		}
		parts = append(parts, fmt.Sprintf("host %s records %d %s of cluster %q", h.Name, held, shards, h.Cluster))
	}
	return strings.Join(parts, ", ")
}

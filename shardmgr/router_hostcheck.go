package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A router checks each map it loads against the hosts' own records
// (local_shards.go), so that a catalog restored from an older backup does
// not send writes to a retired copy or to a host that no longer holds the
// shard. It costs one small query per host, made only when the router
// reads a new map (the catalog's generation changed; the steady refresh
// stays one query on the catalog), and again at each refresh while some
// shard is refused, so that a refusal ends as soon as the catalog is
// repaired.
//
// The router's query is a subset of CompareHostRecords, cheap enough to
// run on every map: per host, the newest generation it recorded, the
// shards it holds live at a generation newer than the catalog's that the
// catalog places elsewhere, and the shards the catalog places on it that
// it does not record at all. verify and init compare the whole records.

// hostCheckTimeout bounds the query on one host's record: a host that does
// not answer is not judged (its shards are routed as the catalog says).
const hostCheckTimeout = 3 * time.Second

// hostRecordSummary is the router's query. $1: the catalog's generation;
// $2: the shards the catalog places on the host.
const hostRecordSummary = `SELECT coalesce(max(generation), 0)::bigint,
	coalesce(array_agg(shard ORDER BY shard) FILTER (WHERE state <> 'fenced' AND generation > $1 AND shard <> ALL ($2::int[])), '{}')::int[],
	coalesce(array_agg(generation ORDER BY shard) FILTER (WHERE state <> 'fenced' AND generation > $1 AND shard <> ALL ($2::int[])), '{}')::bigint[],
	ARRAY(SELECT p FROM pg_catalog.unnest($2::int[]) p WHERE NOT EXISTS (SELECT FROM shardid.local_shards l WHERE l.shard = p) ORDER BY p)::int[]
FROM shardid.local_shards`

type hostSummary struct {
	host    string
	err     error
	newest  int64
	foreign []int32
	gens    []int64
	missing []int32
}

// checkHosts compares m with the records of the hosts in pools and
// returns the shards to refuse (nil when none) and what it found.
func (r *Router) checkHosts(ctx context.Context, m *ShardMap, pools map[string]*pgxpool.Pool) (map[int]StaleShard, *CatalogStaleError) {
	placed := map[string][]int32{}
	for _, s := range m.Shards {
		placed[s.Host] = append(placed[s.Host], int32(s.ID))
	}
	sums := make([]hostSummary, 0, len(pools))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range pools {
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, hostCheckTimeout)
			defer cancel()
			mine := placed[name]
			if mine == nil {
				mine = []int32{}
			}
			h := hostSummary{host: name}
			h.err = p.QueryRow(hctx, hostRecordSummary, m.Generation, mine).Scan(&h.newest, &h.foreign, &h.gens, &h.missing)
			mu.Lock()
			sums = append(sums, h)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(sums, func(a, b hostSummary) int {
		switch {
		case a.host < b.host:
			return -1
		case a.host > b.host:
			return 1
		}
		return 0
	})
	e := &CatalogStaleError{Generation: m.Generation}
	stale := map[int]StaleShard{}
	for _, h := range sums {
		if h.err != nil {
			r.unreadableHost(h.host, h.err)
			continue
		}
		if h.newest > e.HostGeneration {
			e.HostGeneration, e.Host = h.newest, h.host
		}
		for i, id := range h.foreign {
			s, ok := stale[int(id)]
			if ok && s.HolderGeneration >= h.gens[i] {
				continue
			}
			if int(id) >= len(m.Shards) || m.Shards[id].State == StateMoving {
				// Moving: a move that flipped and opened its target
				// after this map was read.
				continue
			}
			cat := m.Shards[id].Host
			stale[int(id)] = StaleShard{Shard: int(id), CatalogHost: cat, Holder: h.host, HolderGeneration: h.gens[i],
				Reason: fmt.Sprintf("(catalog: %s at generation %d; %s holds it at generation %d)", cat, m.Generation, h.host, h.gens[i])}
		}
		for _, id := range h.missing {
			if _, ok := stale[int(id)]; !ok {
				stale[int(id)] = StaleShard{Shard: int(id), CatalogHost: h.host, Reason: fmt.Sprintf("(catalog: %s, which does not hold it)", h.host)}
			}
		}
	}
	if len(stale) == 0 && e.HostGeneration <= e.Generation {
		return nil, nil
	}
	for _, s := range stale {
		e.Shards = append(e.Shards, s)
	}
	slices.SortFunc(e.Shards, func(a, b StaleShard) int { return a.Shard - b.Shard })
	if len(stale) == 0 {
		stale = nil
	}
	return stale, e
}

// unreadableHost logs, once per host and router, a host whose record the
// router may not read: it routes that host's shards as the catalog says.
func (r *Router) unreadableHost(host string, err error) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.Code != pgerrcode.InsufficientPrivilege && pe.Code != pgerrcode.UndefinedTable) {
		r.opts.log.Debug("shardid router: host record not read", "host", host, "err", err)
		return
	}
	if _, warned := r.recordWarned.LoadOrStore(host, true); warned {
		return
	}
	r.opts.log.Warn("shardid router: cannot read the host's record (shardid.local_shards), so a catalog older than the hosts goes unnoticed there; GRANT USAGE ON SCHEMA shardid and SELECT ON shardid.local_shards to the routing role",
		"host", host, "err", err)
}

// noteHostCheck installs the result of a host check (mu held) and logs a
// new finding.
func (r *Router) noteHostCheckLocked(stale map[int]StaleShard, e *CatalogStaleError) {
	was := r.staleErr
	r.stale, r.staleErr = stale, e
	switch {
	case e != nil && (was == nil || was.Generation != e.Generation || len(was.Shards) != len(e.Shards)):
		r.opts.log.Error("shardid router: the catalog is older than the hosts' records; refusing the shards it places where the hosts say they are not",
			"generation", e.Generation, "host_generation", e.HostGeneration, "refused", len(e.Shards), "err", e)
	case e == nil && was != nil:
		r.opts.log.Info("shardid router: the catalog agrees with the hosts' records again", "generation", r.m.Generation)
	}
}

// refuseStaleCatalog refuses shard s when the hosts' records contradict
// the catalog's place for it. Reads are refused too: the catalog's host
// may keep a retired copy under the shard's name (a move whose cleanup
// did not run), whose rows are out of date, or none at all.
func (r *Router) refuseStaleCatalog(s Shard) error {
	r.mu.RLock()
	st, ok := r.stale[s.ID]
	e := r.staleErr
	r.mu.RUnlock()
	if !ok {
		return nil
	}
	return &ShardError{Shard: s.ID, Host: s.Host, Err: &CatalogStaleError{Generation: e.Generation, HostGeneration: e.HostGeneration, Host: e.Host, Shards: []StaleShard{st}}}
}

// CatalogStale returns what the router's last check of the hosts' records
// found against its map: nil when they agree.
func (r *Router) CatalogStale() *CatalogStaleError {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.staleErr
}

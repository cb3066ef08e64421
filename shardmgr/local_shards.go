package shardmgr

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// A catalog restored from an older backup points shards at hosts whose
// copies were retired or dropped since, and forgets hosts added since.
// The hosts keep their own record (shardid.local_shards): every step that
// makes a shard live on a host (init, a move's opening of its target, an
// abort giving the source back) records there the generation at which the
// catalog committed that placement, after the commit; a retired copy's
// row is removed with the rename that retires it. So a record's
// generation is never newer than the catalog that placed it, and a host
// that holds a generation newer than the catalog's, or a placement the
// catalog does not know, shows a catalog older than the hosts.

// Local shard states a host records besides the catalog's states.
const (
	// LocalFenced is a move's incoming copy: it refuses writes until the
	// move flips the catalog and opens it.
	LocalFenced = "fenced"
)

// LocalShard is one row of a host's own record (shardid.local_shards).
type LocalShard struct {
	Shard  int
	Schema string
	// State is the catalog's state when it was recorded (the live copy
	// is here) or LocalFenced.
	State string
	// Generation is the catalog generation that placed it here.
	Generation int64
}

// Held reports whether the host holds the shard's live copy (any state
// but a move's fenced incoming copy).
func (l LocalShard) Held() bool { return l.State != LocalFenced }

// ReadLocalShards reads a host's record; nil when the host has none (no
// shardid schema yet).
func ReadLocalShards(ctx context.Context, q Querier) ([]LocalShard, error) {
	rows, err := q.Query(ctx, `SELECT shard, schema_name, state, generation FROM shardid.local_shards ORDER BY shard`)
	if err != nil {
		if pg.IsUndefinedTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read host record: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LocalShard, error) {
		var l LocalShard
		return l, r.Scan(&l.Shard, &l.Schema, &l.State, &l.Generation)
	})
	if err != nil {
		if pg.IsUndefinedTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read host record: %w", err)
	}
	return out, nil
}

// StaleShard is a shard whose place in the catalog the hosts' records
// contradict.
type StaleShard struct {
	Shard int `json:"shard"`
	// CatalogHost is where the catalog places it.
	CatalogHost string `json:"catalog_host"`
	// Holder is the host that records it live at the newest generation
	// (HolderGeneration); "" when no host the reader could read does.
	Holder           string `json:"holder,omitempty"`
	HolderGeneration int64  `json:"holder_generation,omitempty"`
	// Reason says what contradicts the catalog, for a message.
	Reason string `json:"reason"`
}

// CatalogStaleError is a catalog older than the hosts' own records: a
// host recorded a generation the catalog has not reached, or the catalog
// places shards where the hosts say they are not. It wraps
// ErrCatalogStale.
type CatalogStaleError struct {
	// Generation is the catalog's.
	Generation int64
	// HostGeneration is the newest generation a host recorded, and Host
	// the host that recorded it.
	HostGeneration int64
	Host           string
	// Shards are the shards the catalog places wrongly, by id.
	Shards []StaleShard
}

func (e *CatalogStaleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: catalog generation %d", ErrCatalogStale, e.Generation)
	if e.HostGeneration > e.Generation {
		fmt.Fprintf(&b, ", host %s recorded generation %d", e.Host, e.HostGeneration)
	}
	if len(e.Shards) > 0 {
		fmt.Fprintf(&b, "; %d shards placed where the hosts say they are not:", len(e.Shards))
		for i, s := range e.Shards {
			if i == shownErrors {
				fmt.Fprintf(&b, "; and %d more", len(e.Shards)-shownErrors)
				break
			}
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " shard %d %s", s.Shard, s.Reason)
		}
	}
	return b.String()
}

func (e *CatalogStaleError) Unwrap() error { return ErrCatalogStale }

// CompareHostRecords compares map m with what the hosts record (recs, by
// host name; a host missing from recs could not be read and is judged
// only by the others). It returns nil when nothing contradicts the
// catalog. A shard is stale when the host the catalog names does not
// record it at all (its copy was retired or dropped) while another host
// holds it live or some host recorded a generation newer than the
// catalog's, or when another host records its live copy at a generation
// newer than the catalog's, or than the named host's (unless the catalog
// shows the shard moving: a newer holder is then the move's own target).
// A move's incoming copy (fenced) on the named host is a move between its
// flip and the opening of the copy: not stale.
func CompareHostRecords(m *ShardMap, recs map[string][]LocalShard) *CatalogStaleError {
	e := &CatalogStaleError{Generation: m.Generation}
	type held struct {
		host string
		gen  int64
	}
	live := map[int][]held{}                 // shard -> hosts that hold it live
	rowOn := map[string]map[int]LocalShard{} // host -> shard -> row
	hosts := make([]string, 0, len(recs))
	for h := range recs {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		rowOn[h] = map[int]LocalShard{}
		for _, l := range recs[h] {
			rowOn[h][l.Shard] = l
			if l.Generation > e.HostGeneration {
				e.HostGeneration, e.Host = l.Generation, h
			}
			if l.Held() {
				live[l.Shard] = append(live[l.Shard], held{h, l.Generation})
			}
		}
	}
	for _, s := range m.Shards {
		var newest held
		for _, x := range live[s.ID] {
			if x.host != s.Host && x.gen > newest.gen {
				newest = x
			}
		}
		st := StaleShard{Shard: s.ID, CatalogHost: s.Host, Holder: newest.host, HolderGeneration: newest.gen}
		rows, readable := rowOn[s.Host]
		mine, has := rows[s.ID]
		switch {
		case readable && !has && (newest.host != "" || e.HostGeneration > m.Generation):
			// Without either, a shard missing from its host's record
			// is one init did not finish installing (init's to
			// repair, verify's host-record check).
			st.Reason = fmt.Sprintf("(catalog: %s, which does not hold it", s.Host)
		case s.State == StateMoving:
			// An open move: a newer holder is the move flipping after
			// the map was read; the move's own checks judge it.
			continue
		case newest.host != "" && newest.gen > m.Generation:
			st.Reason = fmt.Sprintf("(catalog: %s at generation %d", s.Host, m.Generation)
		case newest.host != "" && has && mine.Held() && newest.gen > mine.Generation:
			st.Reason = fmt.Sprintf("(catalog: %s, which holds it at generation %d", s.Host, mine.Generation)
		default:
			continue
		}
		if newest.host != "" {
			st.Reason += fmt.Sprintf("; %s holds it at generation %d)", newest.host, newest.gen)
		} else {
			st.Reason += "; no other host holds it)"
		}
		e.Shards = append(e.Shards, st)
	}
	if len(e.Shards) == 0 && e.HostGeneration <= e.Generation {
		return nil
	}
	return e
}

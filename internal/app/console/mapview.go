package console

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// Kinds of run on a host's strip. Each has a colour and a pattern in
// console.css and a word in the legend, so no meaning is colour alone.
const (
	kindActive   = "active"
	kindMoving   = "moving"
	kindReadOnly = "read-only"
	kindIncoming = "incoming" // the target of a move in progress
	kindRetained = "retained" // an old copy a finished move keeps
	// kindProblem is a shard the console's last verify run (/api/verify)
	// named in a problem: a stray copy, a missing generator, a stale
	// catalog. It stays until a later run no longer names it.
	kindProblem = "problem"
)

// mapView is the map page's data.
type mapView struct {
	Generation int64
	Shards     int
	Hosts      []hostRow
	Moves      []install.MoveStatus
	Retained   int
	Counts     map[string]int // shards by state
	// Detail is the shard the page was asked for (?shard=N: the shard
	// form without JavaScript), nil when none.
	Detail *install.ShardDetail
	// FileProblem says the cluster file could not be reread and the
	// console shows the hosts of the last good read; "" when none.
	FileProblem string
	// Filter is the map's filter (?shards=&state=); with one active the
	// strips show only the shards it matches, Matched counts them and
	// Matches lists the first filterMatchesShown.
	Filter  *mapFilter
	Matched int
	Matches []filterMatch
}

// hostRow is one host of the map.
type hostRow struct {
	Name        string
	DSN         string // as the catalog records it: no password
	Count       int
	Unreachable string
	// Server is what the host's server says of itself (hosts.List: system
	// identifier, timeline, version, the address reached, role, lag); nil
	// when it did not answer or was not asked. ProbeError is why.
	Server     *hosts.Server
	ProbeError string
	Runs       []shardRun
	Ranges     []stateRanges
	// Hidden: a filter is active and matches none of the host's shards.
	Hidden bool
	// Metrics are the host's samples of the last 15 minutes (metrics.go);
	// nil before the first or when the console samples nothing.
	Metrics *hostMetrics
}

// shardRun is a run of consecutive shards of one kind on a host's strip,
// placed by percent of the shard space.
type shardRun struct {
	From, To    int
	Kind        string
	Left, Width float64
}

// stateRanges is a host's shards of one kind, as text: the map's meaning
// without colours.
type stateRanges struct {
	Kind   string
	Count  int
	Ranges string
}

// mapView reads the status (as `shardid status --json`) and the retained
// copies, and lays them out.
func (s *Console) mapView(ctx context.Context, f *mapFilter) (*mapView, error) {
	v, names, err := s.readMapView(ctx, f)
	if err == nil && s.noteHosts(ctx, names) {
		// The cluster file was reread (a host was added): the map is
		// read again through the new handle, which knows the host.
		v, _, err = s.readMapView(ctx, f)
	}
	if err != nil {
		return nil, err
	}
	v.FileProblem = s.fileProblem()
	return v, nil
}

// readMapView reads the map through the handle in use; names are the
// catalog's hosts.
func (s *Console) readMapView(ctx context.Context, f *mapFilter) (*mapView, []string, error) {
	c, release := s.use()
	defer release()
	// The hosts' identities are read beside the map, each probe bounded
	// by hostProbeTimeout: a host that does not answer delays the page by
	// that much at most, and its row says why.
	var list []hosts.Host
	var listErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		list, listErr = s.hostIdentities(ctx, c)
	}()
	st, kept, err := s.readMap(ctx, c)
	<-done
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(st.Hosts))
	for _, h := range st.Hosts {
		names = append(names, h.Name)
	}
	v := layoutMap(c.Config(), st, kept, s.verifyNamed(), f)
	byName := map[string]hosts.Host{}
	for _, h := range list {
		byName[h.Name] = h
	}
	for i := range v.Hosts {
		row := &v.Hosts[i]
		row.Metrics = s.metricsOf(row.Name)
		if h, ok := byName[row.Name]; ok {
			row.Server, row.ProbeError = h.Server, h.Error
		} else if listErr != nil {
			row.ProbeError = "identity not read: " + listErr.Error()
		}
	}
	return v, names, nil
}

// hostProbeTimeout bounds each host's identity probe behind the map and
// /api/hosts.
const hostProbeTimeout = 5 * time.Second

// identityTTL is how long the map shows the hosts' identities it read
// before it asks the hosts again. A server's identity, role and version
// change at a failover, not between two refreshes of the page (every 2 s
// by default), and asking 100 hosts each time made the map's load 4x
// slower (docs/benchmarks.md); reachability comes fresh with the map's
// status. /api/hosts always asks.
const identityTTL = 15 * time.Second

// hostIdentities is the hosts' identities for the map: read at most once
// per identityTTL.
func (s *Console) hostIdentities(ctx context.Context, c *cluster.Cluster) ([]hosts.Host, error) {
	if s.readHosts == nil {
		return nil, nil
	}
	s.mu.Lock()
	last := s.identity
	s.mu.Unlock()
	if last != nil && time.Since(last.at) < identityTTL {
		return last.list, last.err
	}
	list, err := s.readHosts(ctx, c)
	if ctx.Err() == nil {
		s.mu.Lock()
		s.identity = &identityRead{at: time.Now(), list: list, err: err}
		s.mu.Unlock()
	}
	return list, err
}

// readHostsOf reads each host's identity and reachability as `shardid
// host list --json` does.
func readHostsOf(ctx context.Context, c *cluster.Cluster) ([]hosts.Host, error) {
	return hosts.List(ctx, c, hosts.ListOptions{ProbeTimeout: hostProbeTimeout})
}

// hostsNow is /api/hosts' list: read through the handle in use, and
// again after a reread of the cluster file when the list names a host
// the handle does not know.
func (s *Console) hostsNow(ctx context.Context) ([]hosts.Host, error) {
	read := func() ([]hosts.Host, error) {
		c, release := s.use()
		defer release()
		return readHostsOf(ctx, c)
	}
	list, err := read()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list))
	for _, h := range list {
		names = append(names, h.Name)
	}
	if s.noteHosts(ctx, names) {
		return read()
	}
	return list, nil
}

// readMapOf reads what the map shows from the cluster: the status the
// CLI's status prints and the retained copies.
func readMapOf(ctx context.Context, c *cluster.Cluster) (*install.Status, []rebalance.KeptCopy, error) {
	st, err := install.ClusterStatus(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	kept, err := rebalance.RetainedCopies(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	return st, kept, nil
}

// verifyNamed is the shards the console's last verify run named in a
// problem (not in a note); nil before a run.
func (s *Console) verifyNamed() map[int]bool {
	s.mu.Lock()
	last := s.lastVerify
	s.mu.Unlock()
	if last == nil || last.Report == nil {
		return nil
	}
	named := map[int]bool{}
	for _, p := range last.Report.Problems {
		if p.Shard >= 0 {
			named[p.Shard] = true
		}
	}
	return named
}

// layoutMap lays a status out as strips, the shards in named (the last
// verify's problems) as kindProblem on the host the catalog places them
// on; it reads nothing, so that its cost can be measured on a synthetic
// map of any size.
func layoutMap(cfg *shardmgr.Config, st *install.Status, kept []rebalance.KeptCopy, named map[int]bool, f *mapFilter) *mapView {
	n := len(st.Shards)
	v := &mapView{Generation: st.Generation, Shards: n, Moves: st.Moves, Retained: len(kept), Counts: map[string]int{}, Filter: f}
	incoming := map[string][]int{}
	for _, mv := range st.Moves {
		incoming[mv.To] = append(incoming[mv.To], mv.Shard)
	}
	retained := map[string][]int{}
	for _, k := range kept {
		retained[k.Host] = append(retained[k.Host], k.Shard)
	}
	for _, sh := range st.Shards {
		v.Counts[string(sh.State)]++
	}
	for _, h := range st.Hosts {
		row := hostRow{Name: h.Name, Count: len(h.Shards), Unreachable: h.Unreachable}
		if hc, ok := cfg.Host(h.Name); ok {
			row.DSN = hc.CatalogDSN()
		}
		byKind := map[string][]int{}
		for _, id := range h.Shards {
			k := kindActive
			switch {
			case named[id]:
				k = kindProblem
			case st.Shards[id].State == shardmgr.StateMoving:
				k = kindMoving
			case st.Shards[id].State == shardmgr.StateReadOnly:
				k = kindReadOnly
			}
			byKind[k] = append(byKind[k], id)
		}
		byKind[kindIncoming] = incoming[h.Name]
		byKind[kindRetained] = retained[h.Name]
		for _, k := range []string{kindProblem, kindActive, kindMoving, kindReadOnly, kindIncoming, kindRetained} {
			ids := byKind[k]
			if f.Active() {
				ids = slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return !f.match(id, k) })
			}
			slices.Sort(ids)
			if len(ids) == 0 {
				continue
			}
			if f.Active() {
				v.Matched += len(ids)
				for _, id := range ids {
					v.Matches = append(v.Matches, filterMatch{Shard: id, Host: h.Name, Kind: k})
				}
			}
			row.Runs = append(row.Runs, runsOf(ids, k, n)...)
			row.Ranges = append(row.Ranges, stateRanges{Kind: k, Count: len(ids), Ranges: shortList(shardmgr.FormatShardList(ids))})
		}
		row.Hidden = f.Active() && len(row.Runs) == 0
		v.Hosts = append(v.Hosts, row)
	}
	slices.SortFunc(v.Matches, func(a, b filterMatch) int { return a.Shard - b.Shard })
	v.Matches = v.Matches[:min(len(v.Matches), filterMatchesShown)]
	return v
}

// runsOf turns ascending ids into runs of consecutive ids.
func runsOf(ids []int, kind string, n int) []shardRun {
	var out []shardRun
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		out = append(out, shardRun{From: ids[i], To: ids[j], Kind: kind,
			Left: 100 * float64(ids[i]) / float64(n), Width: 100 * float64(ids[j]-ids[i]+1) / float64(n)})
		i = j + 1
	}
	return out
}

// shortList cuts a long list of ranges for the page; the JSON has all.
func shortList(s string) string {
	const most = 160
	if len(s) <= most {
		return s
	}
	cut := strings.LastIndexByte(s[:most], ',')
	if cut < 0 {
		cut = most
	}
	return s[:cut] + ", …"
}

// formatList is shardmgr.FormatShardList, "" for none.
func formatList(ids []int) string {
	if len(ids) == 0 {
		return ""
	}
	return shardmgr.FormatShardList(ids)
}

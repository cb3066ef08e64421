package console

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/shardid/shardid/shardmgr"
)

// mapFilter is the map's filter: the shards by number (ranges as the
// CLI writes them, "5,10-20") and by kind (a state, or incoming,
// retained, problem). The page's form sends it as ?shards=&state=, so
// the filter works without JavaScript; with it, the map part is read
// again as the operator types, without reloading the page.
type mapFilter struct {
	Shards string // as typed
	State  string // a kind of run (kindActive ...), "" for any
	Err    string // why Shards or State was not understood

	ids map[int]bool // nil for any
}

// filterKinds are the kinds the filter offers, in the legend's order.
var filterKinds = []string{kindActive, kindMoving, kindReadOnly, kindIncoming, kindRetained, kindProblem}

// filterMatchesShown bounds the list of matching shards under the map.
const filterMatchesShown = 100

// filterMatch is one shard the filter matched on one host.
type filterMatch struct {
	Shard int
	Host  string
	Kind  string
}

// parseFilter reads the filter from a request's query; a value that
// does not parse is reported in Err and filters nothing.
func parseFilter(q url.Values, shards int) *mapFilter {
	f := &mapFilter{Shards: strings.TrimSpace(q.Get("shards")), State: q.Get("state")}
	if f.State != "" && !slices.Contains(filterKinds, f.State) {
		f.Err = "state " + f.State + ": want one of " + strings.Join(filterKinds, ", ")
		f.State = ""
	}
	if f.Shards != "" {
		ids, err := shardmgr.ParseShardList(strings.Join(strings.Fields(f.Shards), ","))
		if err == nil && ids[len(ids)-1] >= shards {
			err = &outOfRange{ids[len(ids)-1], shards}
		}
		if err != nil {
			f.Err = strings.TrimPrefix(err.Error(), shardmgr.ErrShardList.Error()+": ")
			return f
		}
		f.ids = map[int]bool{}
		for _, id := range ids {
			f.ids[id] = true
		}
	}
	return f
}

type outOfRange struct{ id, shards int }

func (e *outOfRange) Error() string {
	return "shard " + strconv.Itoa(e.id) + ": this cluster's shards are 0-" + strconv.Itoa(e.shards-1)
}

// Active reports whether the filter hides anything.
func (f *mapFilter) Active() bool { return f != nil && (f.ids != nil || f.State != "") }

// Query is the filter as a query string ("" for none), for the map
// part's refreshes.
func (f *mapFilter) Query() string {
	if f == nil {
		return ""
	}
	q := url.Values{}
	if f.Shards != "" {
		q.Set("shards", f.Shards)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	return q.Encode()
}

// match reports whether shard id, shown as kind, passes the filter.
func (f *mapFilter) match(id int, kind string) bool {
	if !f.Active() {
		return true
	}
	return (f.ids == nil || f.ids[id]) && (f.State == "" || f.State == kind)
}

// Kinds are the kinds the filter's state menu offers.
func (f *mapFilter) Kinds() []string { return filterKinds }

package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// syntheticConsole is a console whose map is a synthetic one of shards
// shards on hosts hosts (a range each as init lays them out, or
// scattered round robin; a few moving, incoming and retained), read from no catalog: the cost of laying out, rendering and
// showing a big map, without the catalog's. The cluster file's hosts are
// never connected to.
func syntheticConsole(tb testing.TB, hosts, shards int, scattered bool) *Console {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: big\nshards: %d\ncatalog: postgres://app@127.0.0.1:1/catalog\nhosts:\n", shards)
	for i := range hosts {
		fmt.Fprintf(&b, "  - name: pg%03d\n    dsn: postgres://app:%s@127.0.0.1:1/db%d\n", i+1, secret, i+1)
	}
	path := filepath.Join(tb.TempDir(), "shardid.yaml")
	require.NoError(tb, os.WriteFile(path, []byte(b.String()), 0o600))
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(tb, err)
	c, err := cluster.Open(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(c.Close)
	st := &install.Status{Generation: 42, Hosts: make([]install.HostStatus, hosts), Shards: make([]install.ShardStatus, shards), Moves: []install.MoveStatus{}}
	for i := range st.Hosts {
		st.Hosts[i].Name = fmt.Sprintf("pg%03d", i+1)
	}
	var kept []rebalance.KeptCopy
	for id := range shards {
		h := id * hosts / shards // as init lays shards out: a range per host
		if scattered {
			h = id % hosts // the worst case: no two neighbours on one host
		}
		state := shardmgr.StateActive
		if id%997 == 5 {
			state = shardmgr.StateMoving
			st.Moves = append(st.Moves, install.MoveStatus{ID: int64(id), Shard: id, From: st.Hosts[h].Name, To: st.Hosts[(h+1)%hosts].Name, Mode: "online", Phase: "copy"})
		}
		if id%1009 == 7 {
			kept = append(kept, rebalance.KeptCopy{RetiredCopy: rebalance.RetiredCopy{Shard: id, Host: st.Hosts[(h+3)%hosts].Name}})
		}
		st.Shards[id] = install.ShardStatus{ID: id, Schema: fmt.Sprintf("shard_%04d", id), Host: st.Hosts[h].Name, State: state}
		st.Hosts[h].Shards = append(st.Hosts[h].Shards, id)
	}
	con, err := New(c, Options{SampleEvery: -1}) // the synthetic hosts have no servers to sample
	require.NoError(tb, err)
	con.readMap = func(context.Context, *cluster.Cluster) (*install.Status, []rebalance.KeptCopy, error) {
		return st, kept, nil
	}
	con.readHosts = nil // the synthetic hosts have no servers to ask
	return con
}

// The server's side of the map page for 8192 shards on 100 hosts: layout
// and template, no catalog read.
//
//	go test -run '^$' -bench BenchmarkMapPage -benchtime 20x ./internal/app/console
func BenchmarkMapPage(b *testing.B) {
	for _, scattered := range []bool{false, true} {
		b.Run(layoutName(scattered), func(b *testing.B) { benchMapPage(b, scattered) })
	}
}

func layoutName(scattered bool) string {
	if scattered {
		return "scattered"
	}
	return "ranges"
}

func benchMapPage(b *testing.B, scattered bool) {
	con := syntheticConsole(b, 100, 8192, scattered)
	h := con.Handler()
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code, rec.Body.String())
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// The whole load of the map page for 8192 shards on 100 hosts in headless
// Chromium, from navigation to the map shown (every host row in the DOM),
// the map read from a synthetic catalog answer (see syntheticConsole).
//
//	go test -run '^$' -bench BenchmarkMapPageBrowser -benchtime 10x ./internal/app/console
func BenchmarkMapPageBrowser(b *testing.B) {
	for _, scattered := range []bool{false, true} {
		b.Run(layoutName(scattered), func(b *testing.B) { benchMapPageBrowser(b, scattered) })
	}
}

func benchMapPageBrowser(b *testing.B, scattered bool) {
	con := syntheticConsole(b, 100, 8192, scattered)
	srv := httptest.NewServer(con.Handler())
	b.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/")
	require.NoError(b, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NotContains(b, string(page), secret)
	tab := browse(b)
	ctx, cancel := context.WithTimeout(tab, 10*time.Minute)
	defer cancel()
	var rows int
	for b.Loop() {
		require.NoError(b, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#host-pg100`))))
		rows, err = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.map tbody tr").length`))
		require.NoError(b, err)
	}
	require.Equal(b, 100, rows)
	b.ReportMetric(float64(len(page)), "bytes/page")
}

// The map says in words what its colours say: an unreachable host and
// why, and each kind of run with its shards written out.
func TestMapTellsInWords(t *testing.T) {
	con := syntheticConsole(t, 10, 1024, false)
	st, kept, err := con.readMap(context.Background(), con.current())
	require.NoError(t, err)
	st.Hosts[3].Unreachable = "no answer within 5s"
	con.readMap = func(context.Context, *cluster.Cluster) (*install.Status, []rebalance.KeptCopy, error) {
		return st, kept, nil
	}
	rec := httptest.NewRecorder()
	con.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	page := rec.Body.String()
	require.Contains(t, page, "UNREACHABLE")
	require.Contains(t, page, "no answer within 5s")
	for _, kind := range []string{"active", "moving", "incoming", "retained"} {
		require.Contains(t, page, `class="run k-`+kind+`"`, kind)
		require.Regexp(t, `class="r-`+kind+`">`+kind+` \(\d+\): \d`, page, kind)
	}
	require.NotContains(t, page, secret)
}

// The map page for 8192 shards on 100 hosts read from a real catalog:
// 100 host databases on three local servers, init installing every
// shard (minutes), then the page's loads in headless Chromium, each
// reading the map and the journal from the catalog and probing the 100
// hosts as `shardid status` does (the first also reads their identities,
// which the map then keeps for identityTTL).
//
//	go test -run '^$' -bench BenchmarkMapPageCatalog -benchtime 5x -timeout 60m ./internal/app/console
func BenchmarkMapPageCatalog(b *testing.B) {
	srv := pgtest.Servers(b, 3)
	var sb strings.Builder
	fmt.Fprintf(&sb, "cluster: big\nshards: 8192\ncatalog: %s\nhosts:\n", pgtest.NewDB(b, srv[0]))
	for i := range 100 {
		fmt.Fprintf(&sb, "  - name: pg%03d\n    dsn: %s\n", i+1, pgtest.NewDB(b, srv[i%3]))
	}
	path := filepath.Join(b.TempDir(), "shardid.yaml")
	require.NoError(b, os.WriteFile(path, []byte(sb.String()), 0o600))
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(b, err)
	c, err := cluster.Open(context.Background(), cfg, cluster.WithConnectRetry(8, time.Second))
	require.NoError(b, err)
	b.Cleanup(c.Close)
	start := time.Now()
	_, err = install.Init(context.Background(), c, install.InitOptions{Workers: 1})
	require.NoError(b, err)
	b.Logf("init of 8192 shards on 100 hosts: %s", time.Since(start).Round(time.Second))
	con, err := New(c, Options{})
	require.NoError(b, err)
	web := httptest.NewServer(con.Handler())
	b.Cleanup(web.Close)
	tab := browse(b)
	ctx, cancel := context.WithTimeout(tab, 30*time.Minute)
	defer cancel()
	// The first load asks the 100 hosts for their identities; the loads
	// timed below come within identityTTL and show what it read.
	start = time.Now()
	require.NoError(b, chromedp.Do(ctx, chromedp.Navigate(web.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#host-pg100`))))
	b.Logf("first load, the hosts' identities read: %s", time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	for b.Loop() {
		require.NoError(b, chromedp.Do(ctx, chromedp.Navigate(web.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#host-pg100`))))
	}
}

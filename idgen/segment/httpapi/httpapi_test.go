package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newAllocator starts an allocator over a new database on each server,
// closed when the test ends.
func newAllocator(tb testing.TB, servers []*localpg.Server, tags map[string]segment.TagConfig, opts ...segment.Option) *segment.Allocator {
	tb.Helper()
	var dsns []string
	var pools []*pgxpool.Pool
	for _, s := range servers {
		dsn := pgtest.NewDB(tb, s)
		dsns = append(dsns, dsn)
		pools = append(pools, pgtest.Pool(tb, dsn))
	}
	opts = append([]segment.Option{segment.WithLogger(quiet), segment.WithPrepare(func(ctx context.Context, i int) error {
		return migrations.Up(ctx, dsns[i], migrations.Segment)
	})}, opts...)
	a, err := segment.New(pools, tags, opts...)
	require.NoError(tb, err)
	tb.Cleanup(a.Close)
	return a
}

// newService starts an allocator over one database on each server and an
// HTTP test server for it.
func newService(t *testing.T, servers []*localpg.Server, tags map[string]segment.TagConfig, opts ...segment.Option) (*httptest.Server, *segment.Allocator) {
	t.Helper()
	a := newAllocator(t, servers, tags, opts...)
	h, err := httpapi.New(a, httpapi.WithLogger(quiet))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, a
}

type idsBody struct {
	Tag string   `json:"tag"`
	IDs []string `json:"ids"`
}

type errBody struct {
	Error string `json:"error"`
}

func get(t *testing.T, url string, body any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"), url)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, body), "%s: %s", url, raw)
	return resp.StatusCode
}

func TestIDs(t *testing.T) {
	t.Parallel()
	srv, _ := newService(t, pgtest.Servers(t, 1), map[string]segment.TagConfig{
		"payment": {},
		"order":   {Format: "ORD-{date}-{bucket:2}-{seq:10}"},
	})

	var one idsBody
	require.Equal(t, 200, get(t, srv.URL+"/v1/ids/payment", &one))
	require.Equal(t, "payment", one.Tag)
	require.Len(t, one.IDs, 1)
	first, err := strconv.ParseInt(one.IDs[0], 10, 64)
	require.NoError(t, err)
	require.Positive(t, first)

	var many idsBody
	require.Equal(t, 200, get(t, srv.URL+"/v1/ids/payment?count=1000", &many))
	require.Len(t, many.IDs, 1000)
	seen := map[string]bool{one.IDs[0]: true}
	for _, id := range many.IDs {
		require.False(t, seen[id], "duplicate %s", id)
		seen[id] = true
	}

	var formatted idsBody
	require.Equal(t, 200, get(t, srv.URL+"/v1/ids/order?count=3&key=user%2042", &formatted))
	f, err := segment.CompileFormat("ORD-{date}-{bucket:2}-{seq:10}")
	require.NoError(t, err)
	for _, id := range formatted.IDs {
		parts, err := f.Parse(id)
		require.NoError(t, err, id)
		require.Equal(t, f.Bucket(0, "user 42"), parts.Bucket)
		require.Equal(t, time.Now().UTC().Format("20060102"), parts.Date.Format("20060102"))
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	srv, _ := newService(t, pgtest.Servers(t, 1), map[string]segment.TagConfig{"payment": {}})
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/v1/ids/nope", 404, "unknown tag"},
		{"/v1/ids/", 404, "unknown tag"},
		{"/v1/ids/payment?count=0", 400, "count"},
		{"/v1/ids/payment?count=1001", 400, "count"},
		{"/v1/ids/payment?count=abc", 400, "count"},
		{"/v1/ids/payment?count=", 400, "count"},
		{"/v1/ids/payment?key=%zz", 400, "key"},
		{"/elsewhere", 404, "no such path"},
	} {
		var e errBody
		require.Equal(t, tc.code, get(t, srv.URL+tc.path, &e), tc.path)
		require.Contains(t, e.Error, tc.msg, tc.path)
	}
	resp, err := http.Post(srv.URL+"/v1/ids/payment", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode)
	require.Equal(t, "GET", resp.Header.Get("Allow"))
	resp, err = http.Head(srv.URL + "/v1/ids/payment")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode, "HEAD would use up ids")
	resp, err = http.Post(srv.URL+"/healthz", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode)
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/ids/payment", strings.NewReader(strings.Repeat("x", 4096)))
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 413, resp.StatusCode)
}

func TestHealthMetricsAndUnavailable(t *testing.T) {
	t.Parallel()
	own := pgtest.Own(t, localpg.Options{})
	srv, _ := newService(t, []*localpg.Server{own}, map[string]segment.TagConfig{"payment": {MinStep: 100, MaxStep: 100}},
		segment.WithBreaker(1, time.Hour))

	var ids idsBody
	require.Equal(t, 200, get(t, srv.URL+"/v1/ids/payment?count=10", &ids))
	var h httpapi.Health
	require.Equal(t, 200, get(t, srv.URL+"/healthz", &h))
	require.Equal(t, "ok", h.Status)
	require.Len(t, h.Sources, 1)
	require.Equal(t, "closed", h.Sources[0].State)
	require.Equal(t, "payment", h.Tags[0].Name)

	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	for _, want := range []string{
		`shardid_segment_ids_served_total{tag="payment"} 10`,
		`shardid_segment_step{tag="payment"} 100`,
		`shardid_segment_loads_total{tag="payment"} 1`,
		`shardid_segment_source_breaker_state{name=`,
		`shardid_segment_http_request_duration_seconds_bucket`,
		`shardid_segment_http_requests_total{code="200"} 1`,
	} {
		require.Contains(t, string(raw), want)
	}

	// Every id in memory is still served after the database stops, then 503.
	inMemory := func() int64 {
		var h httpapi.Health
		get(t, srv.URL+"/healthz", &h)
		return h.Tags[0].InMemory
	}
	require.Equal(t, int64(90), inMemory(), "10 of the first segment of 100 used, no preload yet")
	require.NoError(t, own.Halt())
	served := 0
	for {
		var ids idsBody
		if code := get(t, srv.URL+"/v1/ids/payment?count=10", &ids); code != 200 {
			require.Equal(t, 503, code)
			break
		}
		served += len(ids.IDs)
		require.LessOrEqual(t, served, 90)
	}
	require.Equal(t, 90, served)
	var e errBody
	require.Equal(t, 503, get(t, srv.URL+"/v1/ids/payment", &e))
	require.Contains(t, e.Error, "no source database can serve")
	require.Equal(t, 503, get(t, srv.URL+"/healthz", &h))
	require.Equal(t, "down", h.Status)
	require.Equal(t, "open", h.Sources[0].State)
}

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	_, a := newService(t, pgtest.Servers(t, 1), map[string]segment.TagConfig{"payment": {}})
	h, err := httpapi.New(a)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpapi.Serve(ctx, ln, h, 5*time.Second) }()
	var ids idsBody
	require.Equal(t, 200, get(t, "http://"+ln.Addr().String()+"/v1/ids/payment", &ids))
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	_, err = http.Get("http://" + ln.Addr().String() + "/healthz")
	require.Error(t, err, "the listener is closed")
}

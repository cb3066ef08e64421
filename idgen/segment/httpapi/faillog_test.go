package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/logbuf"
)

// sourceFailuresMetric scrapes shardid_segment_source_failures_total of
// source 0.
func sourceFailuresMetric(t *testing.T, url string) uint64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, `shardid_segment_source_failures_total{name=`) && strings.Contains(l, `source="0"`) {
			f, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			require.NoError(t, err)
			return uint64(f)
		}
	}
	t.Fatalf("no shardid_segment_source_failures_total in %s", raw)
	return 0
}

// With its only source down, a busy service logs the outage in a few
// lines, not one per failed request; it says when it serves again. The
// health page and the metric count the same failures, the background
// probes' included.
func TestOutageIsLoggedOnceAndCountedOnce(t *testing.T) {
	t.Parallel()
	own := pgtest.Own(t, localpg.Options{})
	var logs logbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	a := newAllocator(t, []*localpg.Server{own}, map[string]segment.TagConfig{"payment": {MinStep: 100, MaxStep: 100}},
		segment.WithBreaker(1, 10*time.Millisecond), segment.WithLogger(logger))
	h, err := httpapi.New(a, httpapi.WithLogger(logger), httpapi.WithFailureLogInterval(time.Hour))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	var ids idsBody
	require.Equal(t, 200, get(t, srv.URL+"/v1/ids/payment?count=10", &ids))
	require.NoError(t, own.Halt())
	// Ten clients at once, as a busy service has: each failed request
	// waits for the next background load attempt.
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for failed.Load() < 300 {
				resp, err := http.Get(srv.URL + "/v1/ids/payment?count=10")
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 503 {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	warns := logs.Lines("level=WARN")
	require.LessOrEqual(t, len(warns), 4, "%d failed requests logged as:\n%s", failed.Load(), strings.Join(warns, "\n"))
	require.Len(t, linesWith(warns, "cannot serve ids"), 1)

	// Probes keep failing in the background; /healthz and /metrics agree.
	require.Eventually(t, func() bool { return a.Health()[0].Failures >= 10 }, 20*time.Second, 5*time.Millisecond)
	var health httpapi.Health
	require.Equal(t, 503, get(t, srv.URL+"/healthz", &health))
	src := health.Sources[0]
	require.Equal(t, src.Failures, int(src.FailuresTotal), "no success since the first failure: every failure is a consecutive one")
	metric := sourceFailuresMetric(t, srv.URL)
	require.GreaterOrEqual(t, metric, src.FailuresTotal, "the metric counts what /healthz counts (read later, probes go on)")

	require.NoError(t, own.Restart(context.Background()))
	require.Eventually(t, func() bool {
		var body any
		return get(t, srv.URL+"/v1/ids/payment", &body) == 200
	}, 30*time.Second, 20*time.Millisecond)
	back := linesWith(logs.Lines("level=INFO"), "serving ids again")
	require.Len(t, back, 1)
	require.Contains(t, back[0], "tag=payment")
	require.Contains(t, back[0], "failed_requests=")
	require.Len(t, linesWith(logs.Lines("level=INFO"), "segment source is back"), 1)
}

func linesWith(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

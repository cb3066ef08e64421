package console

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// The ID service panel reads a real ID service's /metrics (the handler
// `shardid serve` serves): per tag the ids served and the rate, per
// source its breaker; the source shows no password.
func TestConsoleService(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	cfg := &segment.Config{Sources: []string{withSecret(pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))}, Tags: map[string]segment.TagConfig{"order": {}}}
	alloc, closeAll, err := httpapi.OpenAllocator(context.Background(), cfg, quiet)
	require.NoError(t, err)
	t.Cleanup(closeAll)
	h, err := httpapi.New(alloc, httpapi.WithLogger(quiet))
	require.NoError(t, err)
	svc := httptest.NewServer(h)
	t.Cleanup(svc.Close)
	draw := func(n string) {
		require.Eventually(t, func() bool { // the source is prepared in the background
			resp, err := http.Get(svc.URL + "/v1/ids/order?count=" + n)
			if err != nil {
				return false
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 3*time.Minute, 50*time.Millisecond, "the ID service did not hand out ids within 3 minutes")
	}
	draw("5")

	tc := newTestCluster(t, 1, 1, 2, 0)
	base, _ := tc.serve(t, Options{ServeURL: svc.URL})
	var got Service
	code, _, body := get(t, base+"/api/service")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Len(t, got.Tags, 1)
	require.Equal(t, "order", got.Tags[0].Tag)
	require.EqualValues(t, 5, got.Tags[0].Served)
	require.Nil(t, got.Tags[0].Rate, "no rate from one look")
	require.Len(t, got.Sources, 1)
	require.Equal(t, "closed", got.Sources[0].Breaker)
	require.NotContains(t, body, secret)

	draw("7")
	_, _, body = get(t, base+"/api/service")
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.EqualValues(t, 12, got.Tags[0].Served)
	require.NotNil(t, got.Tags[0].Rate, "a rate from two looks")
	require.Positive(t, *got.Tags[0].Rate)

	tab := browse(t)
	run(t, tab, "service page", chromedp.Navigate(base+"/service"), chromedp.WaitVisible(css(`#tags`)))
	require.Contains(t, text(t, tab, `#tags`), "order")
	// The rate as a number (a pointer given to printf printed %!f(*float64=0x...)).
	draw("9")
	run(t, tab, "service page again", chromedp.Navigate(base+"/service"), chromedp.WaitVisible(css(`#tags`)))
	rate := eval(t, tab, "rate", chromedp.Evaluate[string](`document.querySelector("#tags tbody tr td:nth-child(3)").textContent`))
	require.Regexp(t, `^\d+\.\d$`, rate)
	require.Contains(t, text(t, tab, `#sources`), "closed")
	require.NotContains(t, eval(t, tab, "page", chromedp.Evaluate[string](`document.documentElement.outerHTML`)), secret)
}

// A --serve-url with a password (for a proxy's basic authentication) is
// sent with the scrape and shown nowhere: not on /service, not in
// /api/service's JSON, not in the error when the service is down (failed
// before: both showed the URL as given).
func TestConsoleServiceURLPasswordNotShown(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	cfg := &segment.Config{Sources: []string{pgtest.NewDB(t, pgtest.Servers(t, 1)[0])}, Tags: map[string]segment.TagConfig{"order": {}}}
	alloc, closeAll, err := httpapi.OpenAllocator(context.Background(), cfg, quiet)
	require.NoError(t, err)
	t.Cleanup(closeAll)
	h, err := httpapi.New(alloc, httpapi.WithLogger(quiet))
	require.NoError(t, err)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "scrape" || p != secret {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(svc.Close)
	withPassword := strings.Replace(svc.URL, "http://", "http://scrape:"+secret+"@", 1)

	tc := newTestCluster(t, 1, 1, 2, 0)
	base, _ := tc.serve(t, Options{ServeURL: withPassword})
	code, _, body := get(t, base+"/api/service")
	require.Equal(t, http.StatusOK, code, "the password is sent: %s", body)
	require.NotContains(t, body, secret)
	require.Contains(t, body, "scrape@127.0.0.1")
	code, _, body = get(t, base+"/service")
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, body, secret)
	require.Contains(t, body, "scrape@127.0.0.1")

	svc.Close()
	for _, path := range []string{"/api/service", "/part/service"} {
		code, _, body = get(t, base+path)
		require.Equal(t, http.StatusBadGateway, code, body)
		require.NotContains(t, body, secret, path)
	}
	_, err = New(tc.c, Options{ServeURL: "ftp://scrape:" + secret + "@host"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret)
}

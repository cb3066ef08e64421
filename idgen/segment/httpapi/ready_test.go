package httpapi_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// A source that failed is not usable until it answers again: /healthz
// says 503 "degraded" and names it, while the other source keeps the tag
// served; it is "ok" again once the source is back.
func TestHealthNotReadyWhileASourceFails(t *testing.T) {
	t.Parallel()
	own := pgtest.Own(t, localpg.Options{})
	srv, _ := newService(t, []*localpg.Server{pgtest.Servers(t, 1)[0], own},
		map[string]segment.TagConfig{"payment": {MinStep: 100, MaxStep: 100}}, segment.WithBreaker(3, 200*time.Millisecond))
	var h httpapi.Health
	require.Eventually(t, func() bool { return get(t, srv.URL+"/healthz", &h) == 200 }, time.Minute, 20*time.Millisecond)
	require.Equal(t, "ok", h.Status)
	// Both sources have the tag's row (a new row needs every source).
	var ids idsBody
	require.Eventually(t, func() bool {
		require.Equal(t, 200, get(t, srv.URL+"/v1/ids/payment?count=100", &ids))
		get(t, srv.URL+"/healthz", &h)
		return h.Sources[0].Loads > 0 && h.Sources[1].Loads > 0
	}, time.Minute, time.Millisecond)
	require.NoError(t, own.Halt())
	require.Eventually(t, func() bool {
		require.Equal(t, 200, get(t, srv.URL+"/v1/ids/payment?count=100", &ids), "the other source serves")
		return get(t, srv.URL+"/healthz", &h) == 503
	}, time.Minute, time.Millisecond)
	require.Equal(t, "degraded", h.Status)
	require.Contains(t, strings.Join(h.Problems, " "), h.Sources[1].Name)
	require.NoError(t, own.Restart(context.Background()))
	require.Eventually(t, func() bool { h = httpapi.Health{}; return get(t, srv.URL+"/healthz", &h) == 200 }, time.Minute, 50*time.Millisecond, "%+v", &h)
	require.Equal(t, "ok", h.Status)
	require.Empty(t, h.Problems)
}

// A check added with WithCheck holds /healthz at 503 while it fails.
func TestHealthCheck(t *testing.T) {
	t.Parallel()
	a := newAllocator(t, pgtest.Servers(t, 1), map[string]segment.TagConfig{"payment": {}})
	var fail error = errors.New("no worker yet")
	h, err := httpapi.New(a, httpapi.WithLogger(quiet), httpapi.WithCheck("snowflake", func() error { return fail }))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var ids idsBody
	require.Equal(t, 200, get(t, srv.URL+"/v1/ids/payment", &ids))
	var health httpapi.Health
	require.Equal(t, 503, get(t, srv.URL+"/healthz", &health))
	require.Equal(t, []string{"snowflake: no worker yet"}, health.Problems)
	require.Error(t, h.Ready())
	fail = nil
	health = httpapi.Health{}
	require.Equal(t, 200, get(t, srv.URL+"/healthz", &health))
	require.Empty(t, health.Problems)
	require.NoError(t, h.Ready())
}

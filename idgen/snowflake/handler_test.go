package snowflake_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/snowflake"
)

func get(t *testing.T, h http.Handler, method, url string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, url, nil))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	return rec.Code, body
}

func TestHandler(t *testing.T) {
	clock := newFakeClock(t2026)
	g, err := snowflake.New(clock.settings(snowflake.Settings{Datacenter: 1, Worker: 2}))
	require.NoError(t, err)
	h := snowflake.NewHandler(g)

	code, body := get(t, h, "GET", "/v1/snowflake?count=1000")
	require.Equal(t, 200, code)
	ids := body["ids"].([]any)
	require.Len(t, ids, 1000)
	var last int64
	for _, s := range ids {
		id, err := strconv.ParseInt(s.(string), 10, 64)
		require.NoError(t, err)
		require.Greater(t, id, last)
		last = id
	}
	code, body = get(t, h, "GET", "/v1/snowflake")
	require.Equal(t, 200, code)
	require.Len(t, body["ids"], 1)

	for _, bad := range []string{"0", "1001", "x", "-1"} {
		code, body = get(t, h, "GET", "/v1/snowflake?count="+bad)
		require.Equal(t, 400, code, bad)
		require.Contains(t, body["error"], "count")
	}
	code, _ = get(t, h, "POST", "/v1/snowflake")
	require.Equal(t, 405, code)
	code, _ = get(t, h, "GET", "/v1/other")
	require.Equal(t, 404, code)

	clock.Add(-time.Second)
	code, body = get(t, h, "GET", "/v1/snowflake?count=5")
	require.Equal(t, 503, code)
	require.Contains(t, body["error"], "clock moved backwards")
}

func TestConfig(t *testing.T) {
	c := snowflake.Config{Leases: "postgres://u:secret@h/leases", Datacenter: 3}
	require.NoError(t, c.Validate())
	require.Equal(t, snowflake.TwitterEpoch, c.Settings().Layout.Epoch)
	for _, bad := range []snowflake.Config{{}, {Leases: "x", Datacenter: 32}, {Leases: "x", EpochMS: -1}, {Leases: "x", TTL: time.Millisecond}} {
		require.ErrorIs(t, bad.Validate(), snowflake.ErrInvalidSettings)
	}
}

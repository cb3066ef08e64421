package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// The console on a cluster whose servers take the toolkit's role only
// over TLS (sslmode=verify-full, a CA of the test's own): its pages and
// JSON read the catalog and the hosts (each host's role and system
// identifier), verify runs from it and passes, and its apply moves
// shards onto a host added empty. No browser: the handlers are what
// connect.
func TestConsoleOverVerifyFullTLS(t *testing.T) {
	tc := newTestClusterOverTLS(t, 1, 2, 4, 2)
	tc.addHost(t, "pg3", 0)
	token := "0123456789abcdef0123456789abcdef"
	base, _ := tc.serve(t, Options{Actions: true, Token: token})

	for _, p := range []string{"/", "/moves", "/checks", "/part/map", "/part/moves", "/part/migrations", "/part/shard/0",
		"/api/status", "/api/migrations", "/api/shard/0", "/api/moves?all=1"} {
		code, _, body := get(t, base+p)
		require.Equal(t, http.StatusOK, code, "%s: %s", p, body)
	}

	var sysid string
	require.NoError(t, pgtest.Pool(t, tc.hostDSN(t, "pg1")).QueryRow(context.Background(),
		`SELECT system_identifier::text FROM pg_catalog.pg_control_system()`).Scan(&sysid))
	code, _, body := get(t, base+"/api/hosts")
	require.Equal(t, http.StatusOK, code, body)
	var hosts []struct {
		Name   string `json:"name"`
		Server struct {
			Role     string `json:"role"`
			SystemID string `json:"system_identifier"`
		} `json:"server"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &hosts), body)
	require.Len(t, hosts, 3)
	for _, h := range hosts {
		require.Equal(t, "primary", h.Server.Role, h.Name)
		require.Equal(t, sysid, h.Server.SystemID, h.Name)
	}

	code, _, body = do(t, http.MethodPost, base+"/api/verify", nil, "")
	require.Equal(t, http.StatusOK, code, body)
	code, _, body = get(t, base+"/api/verify")
	require.Equal(t, http.StatusOK, code, body)
	var rep struct {
		OK bool `json:"ok"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &rep), body)
	require.True(t, rep.OK, body)

	code, _, body = do(t, http.MethodPost, base+"/api/actions/apply", strings.NewReader(`{"confirm":"apply"}`), token)
	require.Equal(t, http.StatusAccepted, code, body)
	require.Eventually(t, func() bool {
		_, _, body = do(t, http.MethodGet, base+"/api/actions/last", nil, "")
		return strings.Contains(body, `"finished"`)
	}, 10*time.Minute, 200*time.Millisecond, "apply did not finish within 10 minutes")
	require.NotContains(t, body, `"error"`)
	for _, h := range mustStatus(t, tc).Hosts {
		require.NotEmpty(t, h.Shards, "%s holds shards after the console's apply", h.Name)
	}
}

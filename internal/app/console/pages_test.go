package console

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// A page or part sent with a status other than 200 says it is HTML: the
// handler sets Content-Type before the status. The recorder keeps the
// headers as they were at WriteHeader and guesses nothing, so the test
// sees what the handler sent; Go's server would have guessed text/html
// from the body, which hid the bug on the wire. Failed before: render set
// Content-Type after the caller's WriteHeader, so a 400, 404 or 502 went
// out without it (actual "" for /decode?ids=notanid).
func TestConsoleErrorPagesSayHTML(t *testing.T) {
	tc := newTestCluster(t, 1, 1, 2, 0)
	con, err := New(tc.c, Options{Migrations: tc.set})
	require.NoError(t, err)
	t.Cleanup(con.Close)
	h := con.Handler()
	for _, tt := range []struct {
		path   string
		status int
	}{
		{"/decode", http.StatusOK},
		{"/decode?ids=notanid", http.StatusBadRequest},
		{"/?shard=notanumber", http.StatusBadRequest},
		{"/part/shard/notanumber", http.StatusBadRequest},
		{"/part/shard/999", http.StatusNotFound},
		{"/audit?limit=abc", http.StatusBadRequest},
		{"/service", http.StatusNotFound}, // no --serve-url
	} {
		req := httptest.NewRequest(http.MethodGet, tt.path, nil)
		req.Host = "127.0.0.1"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		resp := rec.Result() // the headers as sent with the status
		require.Equal(t, tt.status, resp.StatusCode, "%s: %s", tt.path, rec.Body)
		require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"), "%s (%d)", tt.path, resp.StatusCode)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), tt.path)
	}
}

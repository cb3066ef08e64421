package console

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// TestConsoleMapMarksVerifyProblems: the map turns a shard red
// (kind "problem", in the legend) once the console's last verify run
// (/api/verify) named it, and only that shard; before the run it shows
// as active. Before, the map stayed green whatever verify said (failed
// before).
func TestConsoleMapMarksVerifyProblems(t *testing.T) {
	tc := newTestCluster(t, 1, 2, 4, 1)
	_, err := pgtest.Pool(t, tc.hostDSN(t, "pg1")).Exec(context.Background(), `DROP FUNCTION shard_0001.next_id() CASCADE`)
	require.NoError(t, err)
	base, _ := tc.serve(t, Options{})

	code, _, body := get(t, base+"/part/map")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `data-kind="problem"`)
	require.Contains(t, body, `data-kind="active" data-from="0" data-to="1"`)

	code, _, _ = do(t, http.MethodPost, base+"/api/verify", nil, "")
	require.Equal(t, http.StatusOK, code)
	code, _, body = get(t, base+"/part/map")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `data-kind="problem" data-from="1" data-to="1"`, "shard 1, named by verify, is red")
	require.Contains(t, body, `data-kind="active" data-from="0" data-to="0"`)
	require.Contains(t, body, `class="swatch k-problem"`, "the legend says what red means")
	require.Contains(t, body, `problem (1): 1`)
}

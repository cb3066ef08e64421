package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

// serve, as a superuser, with a segment source whose database's owner
// migrated it itself and put a statement trigger on shardid.segments:
// the source is refused (health says why, the tag gets no ids) and the
// planter is still no superuser. (Failed before: serve adopted the
// schema and its first segment ran the trigger.)
func TestServeRefusesPlantedSegmentSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	role, roleDSN := pgtest.Planter(t, dsn)
	require.NoError(t, migrations.Up(ctx, roleDSN, migrations.Segment))
	_, err := pgtest.Pool(t, roleDSN).Exec(ctx, pgtest.PlantSQL(role, "shardid.segments")+`
GRANT ALL ON shardid.segments TO PUBLIC`)
	require.NoError(t, err)

	addr := startServeInProcess(t, dsn)
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable && len(body) > 0 &&
			strings.Contains(body, "schema shardid belongs to "+role)
	}, 2*time.Minute, 50*time.Millisecond, "last /healthz: %s", body)
	require.NotEqual(t, http.StatusOK, getStatus(addr, "/v1/ids/payment?count=3"))
	require.False(t, pgtest.Superuser(t, dsn, role), "the planter became a superuser")
	var rows int
	require.NoError(t, pgtest.Pool(t, dsn).QueryRow(ctx, `SELECT count(*) FROM shardid.segments`).Scan(&rows))
	require.Zero(t, rows)
}

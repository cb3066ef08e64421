package schemebench_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/schemebench"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The harness runs end to end on a small size; the figures come from
// `shardid bench schemes`.
func TestRunSmall(t *testing.T) {
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	var steps []schemebench.Step
	res, err := schemebench.Run(context.Background(), dsn, schemebench.Options{Rows: 3000, Rounds: 2, GoDuration: 50 * time.Millisecond,
		Progress: func(s schemebench.Step) { steps = append(steps, s) }})
	require.NoError(t, err)
	// Progress: every step once, in order, counted against the total.
	// Five in-database cases; six on PostgreSQL 18 (its built-in uuidv7()).
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	var version int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&version))
	conn.Close(context.Background())
	inDB := 5
	if version >= 180000 {
		inDB = 6
	}
	require.Len(t, steps, 1+2*(inDB+5+7))
	for i, s := range steps {
		require.Equal(t, i, s.Done)
		require.Equal(t, len(steps), s.Total)
		require.Equal(t, 2, s.Rounds)
		require.NotEmpty(t, s.Case)
	}
	require.Equal(t, "making keys", steps[0].Case)
	require.Equal(t, 2, steps[len(steps)-1].Round)
	require.Len(t, res.InDB, inDB)
	require.Len(t, res.InGo, 5)
	require.Len(t, res.Tables, 7)
	for _, r := range append(append([]schemebench.Rate{}, res.InDB...), res.InGo...) {
		require.Positive(t, r.IDsPerSec, r.Name)
	}
	for _, tb := range res.Tables {
		require.Positive(t, tb.IndexBytes, tb.Name)
		require.Positive(t, tb.TableBytes, tb.Name)
	}
}

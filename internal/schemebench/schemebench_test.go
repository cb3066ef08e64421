package schemebench_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/schemebench"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The harness runs end to end on a small size; the figures come from
// `shardid bench schemes`.
func TestRunSmall(t *testing.T) {
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	res, err := schemebench.Run(context.Background(), dsn, schemebench.Options{Rows: 3000, Rounds: 1, GoDuration: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, res.InDB, 5)
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

package demo_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/demo"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestDemoOnItsOwnServer(t *testing.T) {
	var out bytes.Buffer
	rep, err := demo.Run(context.Background(), &out, demo.Options{Rows: 20_000})
	require.NoError(t, err, out.String())
	require.EqualValues(t, 20_000, rep.Rows)
	require.Zero(t, rep.Duplicates)
	require.Zero(t, rep.WrongShard)
	require.Len(t, rep.Samples, 4)
	for i, s := range rep.Samples {
		require.Equal(t, i, s.Shard)
		require.EqualValues(t, i, s.ID>>10&8191, "the sample id carries its shard")
	}
	require.Contains(t, out.String(), "duplicates found: 0")
}

package demo_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/demo"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestDemoOnThreeHosts(t *testing.T) {
	var out bytes.Buffer
	rep, err := demo.Run(context.Background(), &out, demo.Options{Rows: 20_000})
	require.NoError(t, err, out.String())
	t.Log(out.String())
	require.EqualValues(t, 20_000, rep.Rows)
	require.Equal(t, 64, rep.Shards)
	require.Equal(t, 3, rep.Hosts)
	require.Len(t, rep.RowsPerHost, 3, "every host took rows")
	require.Zero(t, rep.Duplicates)
	require.Zero(t, rep.WrongShard)
	require.True(t, rep.Verify.OK, "%v", rep.Verify.Problems)
	require.NotEmpty(t, rep.Samples)
	for _, s := range rep.Samples {
		require.EqualValues(t, s.Shard, s.Parts.Shard, "the sample id carries its shard")
	}
	for _, want := range []string{"duplicates found: 0", "ids per second", "verify: ok", "pg1 holds shards 0-21 (22)"} {
		require.Contains(t, out.String(), want)
	}
}

package snowflake_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// idgen.Decode (which imports nothing of ours) reads the same fields as
// Layout.Decompose for Twitter's and Sonyflake's layouts.
func TestDecodeAgreesWithIdgen(t *testing.T) {
	ids := []int64{0, 175928847299117063, 1050118621198921728, 529686006769848899, 1<<63 - 1}
	for range 1000 {
		ids = append(ids, rand.Int64())
	}
	for _, id := range ids {
		s := strconv.FormatInt(id, 10)
		tw, err := snowflake.Twitter.Decompose(id)
		require.NoError(t, err)
		d, err := idgen.Decode("snowflake", s, 0)
		require.NoError(t, err)
		require.Equal(t, tw.Time, d.Time)
		for name, want := range map[string]int64{"datacenter": tw.Datacenter, "worker": tw.Worker, "seq": tw.Seq} {
			got, _ := d.Field(name)
			require.Equal(t, want, got, name)
		}
		sf, err := snowflake.Sonyflake.Decompose(id)
		require.NoError(t, err)
		d, err = idgen.Decode("sonyflake", s, 0)
		require.NoError(t, err)
		require.Equal(t, sf.Time, d.Time)
		for name, want := range map[string]int64{"machine": sf.Worker, "seq": sf.Seq} {
			got, _ := d.Field(name)
			require.Equal(t, want, got, name)
		}
	}
	// The sonyflake vector of testdata/ids/schemes.json, composed here.
	p, err := snowflake.Sonyflake.Decompose(529686006769848899)
	require.NoError(t, err)
	back, err := snowflake.Sonyflake.Compose(p.Time, 0, 4675, 3)
	require.NoError(t, err)
	require.Equal(t, int64(529686006769848899), back)
	require.Equal(t, "2024-09-02T03:17:42.760Z", p.Time.Format(idgen.TimeFormat))
}

// Sonyflake's layout leases its 16-bit machine ids the same way.
func TestLeaseSonyflake(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	a := start(t, pool, snowflake.Settings{Layout: snowflake.Sonyflake})
	b := start(t, pool, snowflake.Settings{Layout: snowflake.Sonyflake})
	require.NotEqual(t, lease(t, a).Worker, lease(t, b).Worker)
	ia, ib := next(t, a), next(t, b)
	pa, _ := snowflake.Sonyflake.Decompose(ia)
	pb, _ := snowflake.Sonyflake.Decompose(ib)
	require.Equal(t, lease(t, a).Worker, pa.Worker)
	require.Equal(t, lease(t, b).Worker, pb.Worker)
	require.NoError(t, a.Close(context.Background()))
}

package sql_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
	shsql "github.com/shardid/shardid/sql"
)

// Ids made by the generator in PostgreSQL decode the same with Go's idgen
// and with the SQL helpers installed beside it, in the default layout and in
// another one.
func TestGeneratorAgreesWithIdgen(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		params shsql.Params
		layout idgen.Layout
	}{
		{shsql.Params{Shard: 8191}, idgen.Layout{}},
		{shsql.Params{Shard: 0, Variant: shsql.Instagram}, idgen.Layout{}},
		{shsql.Params{Shard: 1023, TimeBits: 41, ShardBits: 10, SeqBits: 12, Epoch: 1_600_000_000_000, Schema: "s1023"},
			idgen.Layout{Epoch: 1_600_000_000_000, TimeBits: 41, ShardBits: 10, SeqBits: 12}},
	} {
		pool := newShard(t, tc.params)
		schema := tc.params.Schema
		if schema == "" {
			schema = shsql.DefaultSchema(tc.params.Shard)
		}
		rows, err := pool.Query(ctx, "WITH x AS (SELECT "+schema+".next_id() AS id FROM generate_series(1, 3000)) SELECT id, "+
			schema+".id_time(id), "+schema+".id_shard(id), "+schema+".id_seq(id) FROM x")
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			var id int64
			var ts time.Time
			var shard, seq int32
			require.NoError(t, rows.Scan(&id, &ts, &shard, &seq))
			parts, err := tc.layout.Decompose(idgen.ID(id))
			require.NoError(t, err)
			require.EqualValues(t, tc.params.Shard, parts.Shard)
			require.EqualValues(t, shard, parts.Shard)
			require.EqualValues(t, seq, parts.Seq)
			require.Equal(t, ts.UnixMilli(), parts.Time.UnixMilli())
			require.WithinDuration(t, time.Now(), parts.Time, time.Minute)
			n++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, 3000, n)
	}
}

package sql_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	shsql "github.com/shardid/shardid/sql"
)

// An epoch or schema that would render SQL whose every call fails, or
// a generator that hands out ids without time, or one installed among
// PostgreSQL's own objects, is refused before any SQL is rendered.
func TestRenderRefusesEpochAndSchemaThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    shsql.Params
		err  error
		msg  string
	}{
		{"largest int64 epoch", shsql.Params{Epoch: math.MaxInt64}, shsql.ErrLayout, "is in the future"},
		{"future epoch", shsql.Params{Epoch: 99999999999999}, shsql.ErrLayout, "epoch 99999999999999 is in the future"},
		{"epoch an hour ahead", shsql.Params{Epoch: time.Now().Add(time.Hour).UnixMilli()}, shsql.ErrLayout, "in the future"},
		{"pg_catalog", shsql.Params{Schema: "pg_catalog"}, shsql.ErrSchema, "reserved"},
		{"pg_toast", shsql.Params{Schema: "pg_toast"}, shsql.ErrSchema, "reserved"},
		{"any pg_ name", shsql.Params{Schema: "pg_ids"}, shsql.ErrSchema, "reserved"},
		{"information_schema", shsql.Params{Schema: "information_schema"}, shsql.ErrSchema, "reserved"},
		// A layout with 32 shard bits holds the shard, but the generator's
		// advisory lock takes it as an int4: every install or call would fail.
		{"shard beyond int4", shsql.Params{Shard: math.MaxInt32 + 1, TimeBits: 30, ShardBits: 32, SeqBits: 1}, shsql.ErrLayout, "above 2147483647"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := shsql.Render(tc.p)
			require.ErrorIs(t, err, tc.err)
			require.ErrorContains(t, err, tc.msg)
			require.Empty(t, out)
			_, err = shsql.Marker(tc.p)
			require.ErrorIs(t, err, tc.err)
		})
	}
	// What stays accepted: the default, an epoch of today, a schema that
	// only contains pg_.
	for _, p := range []shsql.Params{{}, {Epoch: time.Now().Add(-time.Minute).UnixMilli()}, {Schema: "app_pg_ids"}} {
		_, err := shsql.Render(p)
		require.NoError(t, err, "%+v", p)
	}
}

func TestCheckEpoch(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var ee *shsql.EpochError
	require.NoError(t, shsql.CheckEpoch(shsql.DefaultEpoch, 41, now))
	require.NoError(t, shsql.CheckEpoch(now.UnixMilli(), 41, now))
	err := shsql.CheckEpoch(now.UnixMilli()+1, 41, now)
	require.True(t, errors.As(err, &ee))
	require.Contains(t, ee.Reason, "in the future")
	err = shsql.CheckEpoch(-1, 41, now)
	require.True(t, errors.As(err, &ee))
	require.Equal(t, "is negative", ee.Reason)
	// With a clock near the end of int64 milliseconds, an epoch of now
	// leaves no room for the time bits (id encode's rule).
	end := time.UnixMilli(math.MaxInt64)
	err = shsql.CheckEpoch(end.UnixMilli()-10, 40, end)
	require.ErrorIs(t, err, shsql.ErrLayout)
	require.ErrorContains(t, err, "leaves no room for 40 time bits")
}

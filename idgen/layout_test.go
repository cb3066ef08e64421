package idgen

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ms is a UTC time from milliseconds since the Unix epoch.
func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

var layout41_10_12 = Layout{TimeBits: 41, ShardBits: 10, SeqBits: 12}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		layout Layout
		ok     bool
	}{
		{"zero value is the default", Layout{}, true},
		{"defaults spelled out", DefaultLayout(), true},
		{"41/10/12 adds up to 63", layout41_10_12, true},
		{"custom epoch", Layout{Epoch: 1288834974657}, true},
		{"smallest fields", Layout{TimeBits: 61, ShardBits: 1, SeqBits: 1}, true},
		{"smallest fields, 64", Layout{TimeBits: 62, ShardBits: 1, SeqBits: 1}, true},
		{"two time bits, 64", Layout{TimeBits: 2, ShardBits: 31, SeqBits: 31}, true},
		{"some widths zero", Layout{TimeBits: 41}, false},
		{"zero shard bits", Layout{TimeBits: 53, ShardBits: 0, SeqBits: 10}, false},
		{"zero seq bits", Layout{TimeBits: 50, ShardBits: 13, SeqBits: 0}, false},
		{"one time bit", Layout{TimeBits: 1, ShardBits: 31, SeqBits: 31}, false},
		{"negative width", Layout{TimeBits: 52, ShardBits: 13, SeqBits: -1}, false},
		{"adds up to 62", Layout{TimeBits: 40, ShardBits: 12, SeqBits: 10}, false},
		{"adds up to 65", Layout{TimeBits: 42, ShardBits: 13, SeqBits: 10}, false},
		{"huge widths", Layout{TimeBits: 1000, ShardBits: -500, SeqBits: -436}, false},
		{"widths whose sum wraps to 64", Layout{TimeBits: math.MaxInt, ShardBits: math.MaxInt, SeqBits: 66}, false},
		{"negative epoch", Layout{Epoch: -1}, false},
		{"epoch leaves no room", Layout{Epoch: math.MaxInt64 - (1<<40 - 2)}, false},
		{"latest epoch that fits", Layout{Epoch: math.MaxInt64 - (1<<40 - 1)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.layout.Validate()
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidLayout)
			// An invalid layout is refused everywhere, never half used.
			_, err = tt.layout.Compose(time.Now(), 0, 0)
			require.ErrorIs(t, err, ErrInvalidLayout)
			_, err = tt.layout.ComposeMillis(0, 0, 0)
			require.ErrorIs(t, err, ErrInvalidLayout)
			_, err = tt.layout.Decompose(1)
			require.ErrorIs(t, err, ErrInvalidLayout)
			require.Equal(t, int64(-1), tt.layout.MaxShard())
			require.Equal(t, int64(-1), tt.layout.MaxSeq())
			require.True(t, tt.layout.MaxTime().IsZero())
		})
	}
}

func TestLayoutLimits(t *testing.T) {
	tests := []struct {
		layout           Layout
		str              string
		usable           int
		maxShard, maxSeq int64
		maxTime          string
	}{
		{Default, "41/13/10 epoch 1314220021721", 40, 8191, 1023, "2046-06-27T17:00:49.496Z"},
		{DefaultLayout(), "41/13/10 epoch 1314220021721", 40, 8191, 1023, "2046-06-27T17:00:49.496Z"},
		{layout41_10_12, "41/10/12 epoch 1314220021721", 41, 1023, 4095, "2081-04-30T12:54:37.272Z"},
		{Layout{Epoch: 1, TimeBits: 42, ShardBits: 11, SeqBits: 10}, "42/11/10 epoch 1", 42, 2047, 1023, "2109-05-15T07:35:11.104Z"},
	}
	for _, tt := range tests {
		t.Run(tt.str, func(t *testing.T) {
			require.Equal(t, tt.str, tt.layout.String())
			require.Equal(t, tt.usable, tt.layout.UsableTimeBits())
			require.Equal(t, tt.maxShard, tt.layout.MaxShard())
			require.Equal(t, tt.maxSeq, tt.layout.MaxSeq())
			require.Equal(t, tt.maxTime, tt.layout.MaxTime().Format(TimeFormat))
			require.Equal(t, time.UTC, tt.layout.MaxTime().Location())
		})
	}
	require.Equal(t, DefaultLayout(), Default.Resolved())
	require.Equal(t, "2011-08-24T21:07:01.721Z", Default.EpochTime().Format(TimeFormat))
}

func TestComposeEdges(t *testing.T) {
	const epoch = DefaultEpoch
	tests := []struct {
		name       string
		layout     Layout
		t          time.Time
		shard, seq int64
		want       ID
	}{
		{"epoch, all zero", Default, ms(epoch), 0, 0, 0},
		{"epoch, max shard and seq", Default, ms(epoch), 8191, 1023, 1<<23 - 1},
		{"last ms, all max is MaxInt64", Default, ms(epoch + 1<<40 - 1), 8191, 1023, math.MaxInt64},
		{"last ms, zero shard and seq", Default, ms(epoch + 1<<40 - 1), 0, 0, (1<<40 - 1) << 23},
		{"sub-millisecond truncated", Default, ms(epoch + 1).Add(999999 * time.Nanosecond), 1, 2, 1<<23 | 1<<10 | 2},
		{"other zone, same instant", Default, ms(epoch + 5).In(time.FixedZone("x", -7*3600)), 0, 0, 5 << 23},
		{"41/10/12 shard max", layout41_10_12, ms(epoch), 1023, 0, 1023 << 12},
		{"41/10/12 seq max", layout41_10_12, ms(epoch), 0, 4095, 4095},
		{"41/10/12 last ms", layout41_10_12, ms(epoch + 1<<41 - 1), 1023, 4095, math.MaxInt64},
		{"41/10/12 uses bit 62", layout41_10_12, ms(epoch + 1<<40), 0, 0, 1 << 62},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.layout.Compose(tt.t, tt.shard, tt.seq)
			require.NoError(t, err)
			require.Equal(t, tt.want, id)

			p, err := tt.layout.Decompose(id)
			require.NoError(t, err)
			require.Equal(t, tt.t.Truncate(time.Millisecond).UTC(), p.Time)
			require.Equal(t, time.UTC, p.Time.Location())
			require.Equal(t, tt.shard, p.Shard)
			require.Equal(t, tt.seq, p.Seq)
			require.Equal(t, id, p.ID)
			require.Equal(t, p.Time.UnixMilli()-tt.layout.Resolved().Epoch, p.Millis)

			again, err := tt.layout.ComposeMillis(p.Millis, p.Shard, p.Seq)
			require.NoError(t, err)
			require.Equal(t, id, again)
		})
	}
}

func TestComposeErrors(t *testing.T) {
	const epoch = DefaultEpoch
	far := time.Date(292277026, 1, 1, 0, 0, 0, 0, time.UTC) // UnixMilli overflows here
	tests := []struct {
		name       string
		layout     Layout
		t          time.Time
		shard, seq int64
		want       error
	}{
		{"one ms before epoch", Default, ms(epoch - 1), 0, 0, ErrBeforeEpoch},
		{"one ns before epoch", Default, ms(epoch).Add(-1), 0, 0, ErrBeforeEpoch},
		{"zero time", Default, time.Time{}, 0, 0, ErrBeforeEpoch},
		{"one ms after last", Default, ms(epoch + 1<<40), 0, 0, ErrAfterMaxTime},
		{"41/10/12 one ms after last", layout41_10_12, ms(epoch + 1<<41), 0, 0, ErrAfterMaxTime},
		{"far future does not wrap", Default, far, 0, 0, ErrAfterMaxTime},
		{"shard -1", Default, ms(epoch), -1, 0, ErrShardOutOfRange},
		{"shard 8192", Default, ms(epoch), 8192, 0, ErrShardOutOfRange},
		{"41/10/12 shard 1024", layout41_10_12, ms(epoch), 1024, 0, ErrShardOutOfRange},
		{"seq -1", Default, ms(epoch), 0, -1, ErrSeqOutOfRange},
		{"seq 1024", Default, ms(epoch), 0, 1024, ErrSeqOutOfRange},
		{"41/10/12 seq 4096", layout41_10_12, ms(epoch), 0, 4096, ErrSeqOutOfRange},
		{"seq MinInt64", Default, ms(epoch), 0, math.MinInt64, ErrSeqOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.layout.Compose(tt.t, tt.shard, tt.seq)
			require.ErrorIs(t, err, tt.want)
			require.Zero(t, id)
			require.NotContains(t, err.Error(), "\n")
		})
	}

	// The same limits hold for the millisecond form.
	_, err := Default.ComposeMillis(-1, 0, 0)
	require.ErrorIs(t, err, ErrBeforeEpoch)
	_, err = Default.ComposeMillis(1<<40, 0, 0)
	require.ErrorIs(t, err, ErrAfterMaxTime)
	_, err = Default.ComposeMillis(math.MaxInt64, 0, 0)
	require.ErrorIs(t, err, ErrAfterMaxTime)
	_, err = Default.ComposeMillis(0, 8192, 0)
	require.ErrorIs(t, err, ErrShardOutOfRange)
	_, err = Default.ComposeMillis(0, 0, 1024)
	require.ErrorIs(t, err, ErrSeqOutOfRange)

	// The message carries the value and the limit.
	_, err = Default.Compose(ms(epoch), 8192, 0)
	require.EqualError(t, err, "idgen: shard out of range: 8192 not in 0..8191 (13 shard bits)")
	_, err = Default.Compose(ms(epoch-1), 0, 0)
	require.EqualError(t, err, "idgen: time before the epoch: 2011-08-24T21:07:01.720Z is before 2011-08-24T21:07:01.721Z")
}

func TestDecompose(t *testing.T) {
	tests := []struct {
		name   string
		layout Layout
		id     ID
		want   Parts
	}{
		{"zero", Default, 0, Parts{ID: 0, Time: ms(DefaultEpoch), Millis: 0, Shard: 0, Seq: 0}},
		{"MaxInt64", Default, math.MaxInt64, Parts{ID: math.MaxInt64, Time: ms(DefaultEpoch + 1<<40 - 1), Millis: 1<<40 - 1, Shard: 8191, Seq: 1023}},
		{"41/10/12 MaxInt64", layout41_10_12, math.MaxInt64, Parts{ID: math.MaxInt64, Time: ms(DefaultEpoch + 1<<41 - 1), Millis: 1<<41 - 1, Shard: 1023, Seq: 4095}},
		{"custom epoch", Layout{Epoch: 1000}, 3<<23 | 7<<10 | 9, Parts{ID: 3<<23 | 7<<10 | 9, Time: ms(1003), Millis: 3, Shard: 7, Seq: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.layout.Decompose(tt.id)
			require.NoError(t, err)
			require.Equal(t, tt.want, p)
		})
	}

	for _, id := range []ID{-1, math.MinInt64} {
		_, err := Default.Decompose(id)
		require.ErrorIs(t, err, ErrNegativeID)
		_, err = layout41_10_12.Decompose(id)
		require.ErrorIs(t, err, ErrNegativeID)
	}
}

func TestIDAccessors(t *testing.T) {
	id, err := Default.Compose(time.Date(2026, 11, 29, 14, 31, 52, 784e6, time.UTC), 5, 17)
	require.NoError(t, err)
	require.Equal(t, "2026-11-29T14:31:52.784Z", id.Time().Format(TimeFormat))
	require.Equal(t, int64(5), id.Shard())
	require.Equal(t, int64(17), id.Seq())

	bad := ID(-42)
	require.True(t, bad.Time().IsZero())
	require.Equal(t, int64(-1), bad.Shard())
	require.Equal(t, int64(-1), bad.Seq())
}

// Ids from one shard must sort by time first, then sequence, as plain
// integers; this is what makes them k-sorted in a bigint index.
func TestIDsSortByTimeThenSeq(t *testing.T) {
	a, err := Default.ComposeMillis(100, 8191, 1023)
	require.NoError(t, err)
	b, err := Default.ComposeMillis(101, 0, 0)
	require.NoError(t, err)
	c, err := Default.ComposeMillis(101, 0, 1)
	require.NoError(t, err)
	require.Less(t, a, b)
	require.Less(t, b, c)
}

package idgen

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzRoundTrip composes an id from any layout and fields and checks that
// either the inputs were really out of range (and the error says which), or
// the id takes apart into exactly the same fields and matches the layout
// written out as big-integer arithmetic. It also reads any non-negative id
// back and composes it again.
func FuzzRoundTrip(f *testing.F) {
	f.Add(int64(0), 0, 0, 0, int64(0), int64(0), int64(0))
	f.Add(int64(0), 0, 0, 0, int64(1<<40-1), int64(8191), int64(1023))
	f.Add(int64(0), 0, 0, 0, int64(1<<40), int64(0), int64(0))
	f.Add(int64(0), 0, 0, 0, int64(-1), int64(0), int64(0))
	f.Add(int64(0), 0, 0, 0, int64(5), int64(8192), int64(0))
	f.Add(int64(0), 0, 0, 0, int64(5), int64(0), int64(1024))
	f.Add(int64(0), 41, 10, 12, int64(1<<41-1), int64(1023), int64(4095))
	f.Add(int64(1288834974657), 41, 10, 12, int64(507127738127), int64(1023), int64(4095))
	f.Add(int64(1), 61, 1, 1, int64(math.MaxInt64), int64(1), int64(1))
	f.Add(int64(-5), 41, 13, 10, int64(0), int64(0), int64(0))
	f.Add(int64(math.MaxInt64), 41, 13, 10, int64(0), int64(0), int64(0))
	f.Add(int64(0), 2, 31, 31, int64(0), int64(1<<31-1), int64(1<<31-1))
	f.Add(int64(0), 41, 13, 0, int64(0), int64(0), int64(0))
	f.Add(int64(0), -1, 33, 31, int64(0), int64(0), int64(0))
	f.Add(int64(0), math.MaxInt, math.MaxInt, 66, int64(0), int64(0), int64(0))

	f.Fuzz(func(t *testing.T, epoch int64, timeBits, shardBits, seqBits int, millis, shard, seq int64) {
		l := Layout{Epoch: epoch, TimeBits: timeBits, ShardBits: shardBits, SeqBits: seqBits}
		if err := l.Validate(); err != nil {
			require.ErrorIs(t, err, ErrInvalidLayout)
			return
		}
		r := l.Resolved()
		usable := 63 - r.ShardBits - r.SeqBits
		require.Positive(t, usable)
		require.LessOrEqual(t, usable, r.TimeBits)

		id, err := l.ComposeMillis(millis, shard, seq)
		switch {
		case millis < 0:
			require.ErrorIs(t, err, ErrBeforeEpoch)
		case millis > 1<<usable-1:
			require.ErrorIs(t, err, ErrAfterMaxTime)
		case shard < 0 || shard > 1<<r.ShardBits-1:
			require.ErrorIs(t, err, ErrShardOutOfRange)
		case seq < 0 || seq > 1<<r.SeqBits-1:
			require.ErrorIs(t, err, ErrSeqOutOfRange)
		default:
			require.NoError(t, err)
			require.GreaterOrEqual(t, id, ID(0))
			require.Equal(t, goldenID(goldenLayout{r.Epoch, r.TimeBits, r.ShardBits, r.SeqBits}, millis, shard, seq), id.String())

			p, err := l.Decompose(id)
			require.NoError(t, err)
			require.Equal(t, Parts{ID: id, Time: time.UnixMilli(r.Epoch + millis).UTC(), Millis: millis, Shard: shard, Seq: seq}, p)

			again, err := l.Compose(p.Time, shard, seq)
			require.NoError(t, err)
			require.Equal(t, id, again)
		}
		if err != nil {
			require.Zero(t, id)
		}

		// Any non-negative int64 is an id in every layout.
		any := ID(millis)
		p, err := l.Decompose(any)
		if any < 0 {
			require.ErrorIs(t, err, ErrNegativeID)
			return
		}
		require.NoError(t, err)
		back, err := l.ComposeMillis(p.Millis, p.Shard, p.Seq)
		require.NoError(t, err)
		require.Equal(t, any, back)
		require.False(t, p.Time.After(l.MaxTime()))
		require.False(t, p.Time.Before(l.EpochTime()))
	})
}

// FuzzUnmarshalJSON feeds arbitrary bytes to UnmarshalJSON and Parse. What
// they accept must be exactly what encoding/json reads as a non-negative
// int64, bare or inside a string of plain digits; what they refuse must
// carry one of the documented sentinels on one line.
func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		`0`, `"0"`, `123`, `"123"`, `9223372036854775807`, `"9223372036854775807"`,
		`9223372036854775808`, `"9223372036854775808"`, `-1`, `"-1"`, `-0`, `1.5`, `"1.5"`,
		`5.0`, `1e3`, `1E+3`, `"1e3"`, `""`, `" 1"`, `"+1"`, `null`, `true`, `{}`, `[]`,
		`"\u0031"`, `"12`, ``, `007`, `"007"`, "\"1\n\"", `0x1F`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id := ID(-99) // a value no successful call can leave
		err := id.UnmarshalJSON(data)

		// The oracle: encoding/json's own strict reading into an int64.
		var want int64
		wantOK := false
		trimmed := strings.TrimSpace(string(data))
		if strings.HasPrefix(trimmed, `"`) {
			var s string
			if json.Unmarshal(data, &s) == nil && s != "" && strings.Trim(s, "0123456789") == "" {
				if v, perr := strconv.ParseInt(s, 10, 64); perr == nil {
					want, wantOK = v, true
				}
			}
		} else if json.Valid(data) && trimmed != "null" {
			if json.Unmarshal(data, &want) == nil && want >= 0 && !strings.HasPrefix(trimmed, "-") {
				wantOK = true
			}
		}

		if trimmed == "null" {
			require.NoError(t, err)
			require.Equal(t, ID(-99), id)
			return
		}
		if err != nil {
			require.False(t, wantOK, "refused %q, which encoding/json reads as %d: %v", data, want, err)
			require.True(t, errors.Is(err, ErrSyntax) || errors.Is(err, ErrNegativeID) || errors.Is(err, ErrIDOutOfRange), "%v", err)
			require.NotContains(t, err.Error(), "\n")
			require.Equal(t, ID(-99), id, "a failed unmarshal leaves the id alone")
			return
		}
		if json.Valid(data) {
			require.True(t, wantOK, "accepted %q as %d, which encoding/json does not read as an int64", data, id)
			require.Equal(t, want, int64(id))
		}
		require.GreaterOrEqual(t, id, ID(0))

		b, err := id.MarshalJSON()
		require.NoError(t, err)
		var back ID
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, id, back)

		// Parse and the bare form agree with the quoted JSON form.
		p, err := Parse(id.String())
		require.NoError(t, err)
		require.Equal(t, id, p)
	})
}

package httpapi

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendIDs(t *testing.T) {
	t.Parallel()
	check := func(ids []int64) {
		t.Helper()
		var got []string
		require.NoError(t, json.Unmarshal(append(append([]byte("["), appendIDs(nil, ids)...), ']'), &got))
		require.Len(t, got, len(ids))
		for i, id := range ids {
			require.Equal(t, strconv.FormatInt(id, 10), got[i])
		}
	}
	check(nil)
	check([]int64{7})
	for _, start := range []int64{1, 8, 95, 997, 9_999_990, math.MaxInt64 - 3000} {
		for _, stride := range []int64{1, 2, 3, 7, 10, 13, 999} {
			ids := make([]int64, 0, 300)
			for k := range int64(300) {
				if start > math.MaxInt64-k*stride {
					break
				}
				ids = append(ids, start+k*stride)
			}
			check(ids)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, 5000)
	v := int64(1)
	for i := range ids {
		switch r.IntN(4) {
		case 0:
			v = r.Int64N(1 << 40) // a jump to another segment, up or down
		default:
			v += 1 + r.Int64N(50)
		}
		ids[i] = v
	}
	check(ids)
}

func BenchmarkAppendIDs(b *testing.B) {
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = 12_345_678 + int64(i)*3
	}
	out := make([]byte, 0, 32<<10)
	for b.Loop() {
		out = appendIDs(out[:0], ids)
	}
}

func BenchmarkAppendIDsStrconv(b *testing.B) {
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = 12_345_678 + int64(i)*3
	}
	out := make([]byte, 0, 32<<10)
	for b.Loop() {
		out = out[:0]
		for _, id := range ids {
			out = append(out, '"')
			out = strconv.AppendInt(out, id, 10)
			out = append(out, '"', ',')
		}
	}
}

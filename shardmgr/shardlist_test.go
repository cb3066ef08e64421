package shardmgr_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

func TestParseShardList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"5", []int{5}},
		{"5,7,10-12", []int{5, 7, 10, 11, 12}},
		{"3-3", []int{3}},
		{"7, 5 ,5,4-6", []int{4, 5, 6, 7}},
		{"0,8191", []int{0, 8191}},
		{"0-8191", nil}, // checked by length below
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := shardmgr.ParseShardList(tt.in)
			require.NoError(t, err)
			if tt.want == nil {
				require.Len(t, got, shardmgr.MaxShards)
				return
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseShardListBad(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"", "bad shard list: empty"},
		{" ", "bad shard list: empty"},
		{"5,,7", `bad shard list: ""`},
		{"5,", `bad shard list: ""`},
		{"a", `bad shard list: "a"`},
		{"-5", `bad shard list: "-5"`},
		{"5-", `bad shard list: "5-"`},
		{"+5", `bad shard list: "+5"`},
		{"1e3", `bad shard list: "1e3"`},
		{"5-7-9", `bad shard list: "5-7-9"`},
		{"20-10", `bad shard list: "20-10": the range ends below its start`},
		{"8192", `bad shard list: "8192": shards are 0..8191`},
		{"99999999999999999999999", `shards are 0..8191`},
		{strings.Repeat("9", 200), `... (200 bytes)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := shardmgr.ParseShardList(tt.in)
			require.ErrorIs(t, err, shardmgr.ErrShardList)
			require.ErrorContains(t, err, tt.msg)
			require.Nil(t, got)
		})
	}
}

func FuzzParseShardList(f *testing.F) {
	for _, s := range []string{"5", "5,7,10-20", "20-10", "", "0-8191", "1,-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := shardmgr.ParseShardList(s)
		if err != nil {
			require.ErrorIs(t, err, shardmgr.ErrShardList)
			return
		}
		require.NotEmpty(t, ids)
		for i, id := range ids {
			require.True(t, id >= 0 && id < shardmgr.MaxShards, id)
			if i > 0 {
				require.Less(t, ids[i-1], id)
			}
		}
	})
}

// FormatShardList writes what ParseShardList reads back.
func TestFormatShardList(t *testing.T) {
	for _, ids := range [][]int{{5}, {0, 1, 2, 3, 7, 9, 10}, {4, 6, 8}, {0, 8191}} {
		s := shardmgr.FormatShardList(ids)
		back, err := shardmgr.ParseShardList(s)
		require.NoError(t, err, s)
		require.Equal(t, ids, back, s)
	}
	require.Equal(t, "0-3,7,9-10", shardmgr.FormatShardList([]int{0, 1, 2, 3, 7, 9, 10}))
	require.Equal(t, "", shardmgr.FormatShardList(nil))
}

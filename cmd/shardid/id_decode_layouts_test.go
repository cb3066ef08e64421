package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIDDecodeLayouts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--layout", "snowflake", "--epoch", "1420070400000", "175928847299117063"},
			"175928847299117063 2016-04-30T11:18:25.796Z datacenter=1 worker=0 seq=7\n"},
		{[]string{"--layout", "snowflake", "1050118621198921728"},
			"1050118621198921728 2018-10-10T20:19:24.211Z datacenter=10 worker=27 seq=0\n"},
		{[]string{"--layout", "uuidv7", "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"},
			"017f22e2-79b0-7cc3-98c4-dc0c0c07398f 2022-02-22T19:22:22.000Z rand_a=3267 rand_b=18c4dc0c0c07398f\n"},
		{[]string{"--layout", "ulid", "01ARYZ6S41TSV4RRFFQ69G5FAV"},
			"01ARYZ6S41TSV4RRFFQ69G5FAV 2016-07-30T22:36:16.385Z random=d6764c61efb99302bd5b\n"},
		{[]string{"--layout", "objectid", "507c7f79bcf86cd7994f6c0e"},
			"507c7f79bcf86cd7994f6c0e 2012-10-15T21:26:17.000Z random=bcf86cd799 machine=12384364 process=55193 counter=5205006\n"},
		{[]string{"--layout", "sonyflake", "529686006769848899"},
			"529686006769848899 2024-09-02T03:17:42.760Z seq=3 machine=4675\n"},
		{[]string{"--layout", "instagram", "4041150592192615424"},
			"4041150592192615424 2026-11-29T14:31:52.784Z shard=5 seq=0\n"},
	} {
		out, err := runShardid(t, append([]string{"id", "decode"}, tc.args...)...)
		require.NoError(t, err, tc.args)
		require.Equal(t, tc.want, out)
	}
	out, err := runShardid(t, "id", "decode", "--json", "--layout", "snowflake", "--epoch", "1420070400000", "175928847299117063")
	require.NoError(t, err)
	require.JSONEq(t, `[{"id":"175928847299117063","layout":"snowflake","time":"2016-04-30T11:18:25.796Z","datacenter":1,"worker":0,"seq":7}]`, out)
}

func TestIDDecodeLayoutsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--layout", "nosuch", "1"},
		{"--layout", "uuidv7", "--epoch", "5", "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"},
		{"--layout", "ulid", "01ARYZ6S41TSV4RRFFQ69G5FAV", "not-a-ulid"},
	} {
		out, err := runShardid(t, append([]string{"id", "decode"}, args...)...)
		require.Error(t, err, args)
		require.Equal(t, 2, exitCode(err), args)
		require.Empty(t, out, "nothing printed when one id is bad")
	}
}

// An epoch so large that an id's time overflows an int64 of milliseconds
// is refused (it printed the year -292275054), for every 64-bit layout.
func TestIDDecodeRefusesOverflowingEpoch(t *testing.T) {
	for _, args := range [][]string{
		{"--epoch", "9223372036854775807", "4041150592192615424"},
		{"--layout", "instagram", "--epoch", "9223372036854775807", "4041150592192615424"},
		{"--layout", "snowflake", "--epoch", "9223372036854775807", "175928847299117063"},
		{"--layout", "sonyflake", "--epoch", "9223372036854775807", "175928847299117063"},
		{"--layout", "snowflake", "--epoch", "9223372036852000000", "175928847299117063"},
	} {
		out, err := runShardid(t, append([]string{"id", "decode"}, args...)...)
		require.Error(t, err, args)
		require.Equal(t, 2, exitCode(err), args)
		require.Contains(t, err.Error(), "leaves no room", args)
		require.Empty(t, out, args)
	}
	out, err := runShardid(t, "id", "decode", "--layout", "snowflake", "--epoch", "1420070400000", "175928847299117063")
	require.NoError(t, err)
	require.Contains(t, out, "2016-04-30T11:18:25.796Z", "an ordinary epoch still decodes")
}

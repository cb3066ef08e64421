package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runShardid runs the real root command as main would, minus os.Exit.
func runShardid(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), err
}

func TestIDDecode(t *testing.T) {
	out, err := runShardid(t, "id", "decode", "4041150592192615424", "0", "9223372036854775807")
	require.NoError(t, err)
	require.Equal(t, `4041150592192615424 2026-11-29T14:31:52.784Z shard=5 seq=0
0 2011-08-24T21:07:01.721Z shard=0 seq=0
9223372036854775807 2046-06-27T17:00:49.496Z shard=8191 seq=1023
`, out)

	// Another epoch moves the time and nothing else.
	out, err = runShardid(t, "id", "decode", "--epoch", "1000", "8388607")
	require.NoError(t, err)
	require.Equal(t, "8388607 1970-01-01T00:00:01.000Z shard=8191 seq=1023\n", out)
}

func TestIDDecodeJSON(t *testing.T) {
	out, err := runShardid(t, "id", "decode", "--json", "4041150592192615424", "9223372036854775807")
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"id":"4041150592192615424","time":"2026-11-29T14:31:52.784Z","shard":5,"seq":0},
		{"id":"9223372036854775807","time":"2046-06-27T17:00:49.496Z","shard":8191,"seq":1023}
	]`, out)

	// Exactly these keys, with these JSON types: scripts depend on them.
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.Len(t, r, 4)
		require.IsType(t, "", r["id"])
		require.IsType(t, "", r["time"])
		require.IsType(t, float64(0), r["shard"])
		require.IsType(t, float64(0), r["seq"])
	}
}

func TestIDEncode(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--time", "2026-11-29T14:31:52.784Z", "--shard", "5", "--seq", "0"}, "4041150592192615424"},
		// Other zones and sub-millisecond digits name the same millisecond.
		{[]string{"--time", "2026-11-29T09:31:52.784999-05:00", "--shard", "5", "--seq", "0"}, "4041150592192615424"},
		{[]string{"--time", "2011-08-24T21:07:01.721Z", "--shard", "0", "--seq", "0"}, "0"},
		{[]string{"--time", "2046-06-27T17:00:49.496Z", "--shard", "8191", "--seq", "1023"}, "9223372036854775807"},
		{[]string{"--time", "1970-01-01T00:00:01Z", "--shard", "8191", "--seq", "1023", "--epoch", "1000"}, "8388607"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := runShardid(t, append([]string{"id", "encode"}, tt.args...)...)
			require.NoError(t, err)
			require.Equal(t, tt.want+"\n", out)
		})
	}

	// encode and decode are inverses.
	out, err := runShardid(t, "id", "encode", "--time", "2030-01-02T03:04:05.678Z", "--shard", "4242", "--seq", "17")
	require.NoError(t, err)
	out, err = runShardid(t, "id", "decode", strings.TrimSpace(out))
	require.NoError(t, err)
	require.Contains(t, out, " 2030-01-02T03:04:05.678Z shard=4242 seq=17\n")
}

func TestIDEncodeJSON(t *testing.T) {
	// The object decode --json prints for the id, with the time as the id
	// holds it (sub-millisecond digits and the zone gone).
	out, err := runShardid(t, "id", "encode", "--json", "--time", "2026-11-29T09:31:52.784999-05:00", "--shard", "5", "--seq", "3")
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"4041150592192615427","time":"2026-11-29T14:31:52.784Z","shard":5,"seq":3}`, out)
	dec, err := runShardid(t, "id", "decode", "--json", "4041150592192615427")
	require.NoError(t, err)
	var arr []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(dec), &arr))
	require.Len(t, arr, 1)
	require.JSONEq(t, string(arr[0]), out)

	// Bad input stays a usage error with --json too.
	_, err = runShardid(t, "id", "encode", "--json", "--time", "2026-11-29T14:31:52.784Z", "--shard", "8192", "--seq", "0")
	require.Error(t, err)
	require.Equal(t, 2, exitCode(err))
}

func TestIDBadInput(t *testing.T) {
	encode := func(extra ...string) []string {
		return append([]string{"id", "encode", "--time", "2026-11-29T14:31:52.784Z", "--shard", "5", "--seq", "0"}, extra...)
	}
	tests := []struct {
		name string
		args []string
		msg  string // part of the one line the user sees
	}{
		{"decode non-number", []string{"id", "decode", "abc"}, `not a decimal id: "abc"`},
		{"decode fraction", []string{"id", "decode", "1.5"}, "has a fraction"},
		{"decode exponent", []string{"id", "decode", "1e18"}, "has an exponent"},
		{"decode negative", []string{"id", "decode", "-5"}, `negative id: "-5"`},
		{"decode negative after --", []string{"id", "decode", "--", "-5"}, `negative id: "-5"`},
		{"decode out of range", []string{"id", "decode", "9223372036854775808"}, "above the largest id 9223372036854775807"},
		{"decode one bad among good", []string{"id", "decode", "1", "x", "2"}, `"x"`},
		{"decode no ids", []string{"id", "decode"}, "requires at least 1 arg"},
		{"decode negative epoch", []string{"id", "decode", "--epoch", "-1", "5"}, "negative epoch"},
		{"decode unknown flag", []string{"id", "decode", "--jsn", "5"}, "unknown flag: --jsn"},
		{"decode letters as flags", []string{"id", "decode", "-x"}, "unknown shorthand flag"},
		{"encode bad time", encode("--time", "yesterday"), `--time "yesterday": want RFC 3339`},
		{"encode time without zone", encode("--time", "2026-11-29T14:31:52"), "want RFC 3339"},
		{"encode before epoch", encode("--time", "2011-08-24T21:07:01.720Z"), "time before the epoch"},
		{"encode after last ms", encode("--time", "2046-06-27T17:00:49.497Z"), "after the last representable millisecond"},
		{"encode shard too big", encode("--shard", "8192"), "shard out of range: 8192 not in 0..8191"},
		{"encode negative shard", encode("--shard", "-1"), "shard out of range: -1"},
		{"encode seq too big", encode("--seq", "1024"), "sequence out of range: 1024 not in 0..1023"},
		{"encode shard not a number", encode("--shard", "five"), `invalid argument "five"`},
		{"encode missing time", []string{"id", "encode", "--shard", "5", "--seq", "0"}, "--time is required"},
		{"encode missing shard", []string{"id", "encode", "--time", "2026-11-29T14:31:52.784Z", "--seq", "0"}, "--shard is required"},
		{"encode missing seq", []string{"id", "encode", "--time", "2026-11-29T14:31:52.784Z", "--shard", "0"}, "--seq is required"},
		{"encode stray argument", encode("7"), "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runShardid(t, tt.args...)
			require.Error(t, err)
			require.Empty(t, out, "nothing is printed on bad input")
			require.Contains(t, err.Error(), tt.msg)
			require.Equal(t, err.Error(), oneLine(err.Error()), "one line")
			require.True(t, isUsageError(err), "bad input is a usage error (exit 2): %v", err)
		})
	}
}

func TestIDHelp(t *testing.T) {
	for _, args := range [][]string{{"id", "--help"}, {"id", "decode", "--help"}, {"id", "encode", "--help"}} {
		out, err := runShardid(t, args...)
		require.NoError(t, err)
		require.Contains(t, out, "Usage:")
	}
}

package idgen

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The golden file is shared with the other side of the layout (the SQL
// helpers, other languages), so it is regenerated deliberately:
//
//	go test ./idgen -run TestGolden -update
var update = flag.Bool("update", false, "rewrite testdata/ids/golden.json")

var goldenPath = filepath.Join("..", "testdata", "ids", "golden.json")

type goldenLayout struct {
	Epoch     int64 `json:"epoch"`
	TimeBits  int   `json:"time_bits"`
	ShardBits int   `json:"shard_bits"`
	SeqBits   int   `json:"seq_bits"`
}

type goldenVector struct {
	Name   string       `json:"name"`
	Layout goldenLayout `json:"layout"`
	ID     string       `json:"id"`
	Time   string       `json:"time"`
	Millis int64        `json:"millis"`
	Shard  int64        `json:"shard"`
	Seq    int64        `json:"seq"`
}

type goldenFile struct {
	Comment string         `json:"comment"`
	Vectors []goldenVector `json:"vectors"`
}

var (
	instagram = goldenLayout{DefaultEpoch, 41, 13, 10}
	wide      = goldenLayout{DefaultEpoch, 41, 10, 12}
	twitter   = goldenLayout{1288834974657, 41, 10, 12} // Twitter's snowflake epoch and widths
	odd       = goldenLayout{1577836800000, 40, 12, 11} // 2020-01-01, all 40 time bits usable
)

// goldenCases are the inputs; their ids are computed by goldenID, not by
// the package under test.
var goldenCases = []struct {
	name              string
	layout            goldenLayout
	millis, shard, sq int64
}{
	{"default: epoch, all zero", instagram, 0, 0, 0},
	{"default: epoch, max shard and seq", instagram, 0, 8191, 1023},
	{"default: one ms after epoch", instagram, 1, 1, 1},
	{"default: Instagram's 2012 blog example (1387263000 ms, shard 1341, 5001 % 1024)", instagram, 1387263000, 1341, 905},
	{"default: 2026-11-29T14:31:52.784Z shard 5 seq 0", instagram, 1795962712784 - DefaultEpoch, 5, 0},
	{"default: 2^53+1, the first id a float64 cannot hold", instagram, 1 << 30, 0, 1},
	{"default: top usable time bit", instagram, 1 << 39, 4096, 512},
	{"default: last ms, all zero", instagram, 1<<40 - 1, 0, 0},
	{"default: last ms, max shard and seq (2^63-1)", instagram, 1<<40 - 1, 8191, 1023},
	{"41/10/12: epoch, all zero", wide, 0, 0, 0},
	{"41/10/12: epoch, max shard and seq", wide, 0, 1023, 4095},
	{"41/10/12: 2026-11-29T14:31:52.784Z shard 5 seq 7", wide, 1795962712784 - DefaultEpoch, 5, 7},
	{"41/10/12: beyond the default layout's last ms (bit 62)", wide, 1 << 40, 0, 0},
	{"41/10/12: last ms, max shard and seq (2^63-1)", wide, 1<<41 - 1, 1023, 4095},
	{"41/10/12 twitter epoch: 2026-11-29T14:31:52.784Z shard 1023 seq 4095", twitter, 1795962712784 - 1288834974657, 1023, 4095},
	{"40/12/11 epoch 2020: last ms, shard 1 seq 2", odd, 1<<40 - 1, 1, 2},
}

// goldenID is the layout written out as arithmetic on unbounded integers:
// millis * 2^(shard+seq bits) + shard * 2^seq bits + seq, refusing anything
// that would not fit in 63 bits.
func goldenID(l goldenLayout, millis, shard, seq int64) string {
	pow := func(n int) *big.Int { return new(big.Int).Exp(big.NewInt(2), big.NewInt(int64(n)), nil) }
	if shard >= pow(l.ShardBits).Int64() || seq >= pow(l.SeqBits).Int64() {
		panic(fmt.Sprintf("golden case out of range: shard %d seq %d", shard, seq))
	}
	id := new(big.Int).Mul(big.NewInt(millis), pow(l.ShardBits+l.SeqBits))
	id.Add(id, new(big.Int).Mul(big.NewInt(shard), pow(l.SeqBits)))
	id.Add(id, big.NewInt(seq))
	if id.Cmp(pow(63)) >= 0 {
		panic(fmt.Sprintf("golden case does not fit in 63 bits: %s", id))
	}
	return id.String()
}

func writeGolden(t *testing.T) {
	f := goldenFile{Comment: "shardid id layout vectors: id = millis * 2^(shard_bits+seq_bits) + shard * 2^seq_bits + seq; time = epoch + millis (UTC, ms); bit 63 is always 0. Regenerate with: go test ./idgen -run TestGolden -update"}
	for _, c := range goldenCases {
		f.Vectors = append(f.Vectors, goldenVector{
			Name:   c.name,
			Layout: c.layout,
			ID:     goldenID(c.layout, c.millis, c.shard, c.sq),
			Time:   time.UnixMilli(c.layout.Epoch + c.millis).UTC().Format("2006-01-02T15:04:05.000Z"),
			Millis: c.millis,
			Shard:  c.shard,
			Seq:    c.sq,
		})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(goldenPath), 0o755))
	require.NoError(t, os.WriteFile(goldenPath, append(b, '\n'), 0o644))
}

func readGolden(t *testing.T) goldenFile {
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	var f goldenFile
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Vectors)
	return f
}

func TestGolden(t *testing.T) {
	if *update {
		writeGolden(t)
	}
	for _, v := range readGolden(t).Vectors {
		t.Run(v.Name, func(t *testing.T) {
			l := Layout{Epoch: v.Layout.Epoch, TimeBits: v.Layout.TimeBits, ShardBits: v.Layout.ShardBits, SeqBits: v.Layout.SeqBits}
			require.NoError(t, l.Validate())
			want, err := Parse(v.ID)
			require.NoError(t, err)
			tm, err := time.Parse(time.RFC3339Nano, v.Time)
			require.NoError(t, err)

			id, err := l.Compose(tm, v.Shard, v.Seq)
			require.NoError(t, err)
			require.Equal(t, want, id, "compose")
			id, err = l.ComposeMillis(v.Millis, v.Shard, v.Seq)
			require.NoError(t, err)
			require.Equal(t, want, id, "compose millis")

			p, err := l.Decompose(want)
			require.NoError(t, err)
			require.Equal(t, Parts{ID: want, Time: tm.UTC(), Millis: v.Millis, Shard: v.Shard, Seq: v.Seq}, p)
			require.Equal(t, v.Time, p.Time.Format(TimeFormat))
			require.Equal(t, v.ID, want.String())

			if l.Resolved() == DefaultLayout() {
				require.Equal(t, tm.UTC(), want.Time())
				require.Equal(t, v.Shard, want.Shard())
				require.Equal(t, v.Seq, want.Seq())
			}
		})
	}
}

// A few vectors were also worked out by hand (with bc), so that the file
// cannot quietly drift together with the generator above.
func TestGoldenHandComputed(t *testing.T) {
	want := map[string]string{
		"default: Instagram's 2012 blog example (1387263000 ms, shard 1341, 5001 % 1024)": "11637205501278089",
		"default: 2026-11-29T14:31:52.784Z shard 5 seq 0":                                 "4041150592192615424",
		"default: last ms, max shard and seq (2^63-1)":                                    "9223372036854775807",
		"41/10/12: beyond the default layout's last ms (bit 62)":                          "4611686018427387904",
		"41/10/12 twitter epoch: 2026-11-29T14:31:52.784Z shard 1023 seq 4095":            "2127047900541222911",
	}
	times := map[string]string{
		"default: 2026-11-29T14:31:52.784Z shard 5 seq 0": "2026-11-29T14:31:52.784Z",
		"default: last ms, max shard and seq (2^63-1)":    "2046-06-27T17:00:49.496Z",
		"41/10/12: last ms, max shard and seq (2^63-1)":   "2081-04-30T12:54:37.272Z",
	}
	got := map[string]goldenVector{}
	for _, v := range readGolden(t).Vectors {
		got[v.Name] = v
	}
	for name, id := range want {
		require.Contains(t, got, name)
		require.Equal(t, id, got[name].ID, name)
	}
	for name, tm := range times {
		require.Contains(t, got, name)
		require.Equal(t, tm, got[name].Time, name)
	}
}

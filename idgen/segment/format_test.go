package segment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
)

var day = time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC)

func TestFormatRenderAndParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		template string
		seq      int64
		key      string
		want     string
		bucket   int
	}{
		{"ORD-{date}-{seq:10}", 12345, "", "ORD-20261129-0000012345", -1},
		{"ORD-{date}-{bucket:2}-{seq:10}", 12345, "", "ORD-20261129-45-0000012345", 45},
		{"ORD-{date}-{bucket:2}-{seq:10}", 12345, "user-42", "ORD-20261129-%s-0000012345", 0},
		{"{seq}", 7, "", "7", -1},
		{"P{seq:3}X", 123456, "", "P123456X", -1},
		{"{bucket:1}{date}{seq:4}", 99, "", "920261129" + "0099", 9},
		{"INV/{seq:6}/{date}", 42, "", "INV/000042/20261129", -1},
	} {
		f, err := segment.CompileFormat(tc.template)
		require.NoError(t, err, tc.template)
		require.Equal(t, tc.template, f.String())
		got := f.Render(tc.seq, day, tc.key)
		if tc.key != "" {
			b := f.Bucket(tc.seq, tc.key)
			require.Equal(t, b, f.Bucket(999, tc.key), "a key's bucket does not depend on the number")
			tc.bucket = b
			require.Len(t, got, len(tc.want)-2+2)
		} else {
			require.Equal(t, tc.want, got)
		}
		parts, err := f.Parse(got)
		require.NoError(t, err, got)
		require.Equal(t, tc.seq, parts.Seq)
		require.Equal(t, tc.bucket, parts.Bucket)
		if f.String() != "{seq}" && f.String() != "P{seq:3}X" {
			require.Equal(t, time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), parts.Date)
		}
	}
}

func TestFormatErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"", "ORD", "{seq}{seq}", "{seq:0}", "{seq:x}", "{seq:20}", "{date:2}", "{bucket}", "{bucket:10}{seq}",
		"{nope}{seq}", "{seq", "seq}", "{seq}{date}", "{seq}1", "{date}{date}{seq}",
	} {
		_, err := segment.CompileFormat(bad)
		require.ErrorIs(t, err, segment.ErrFormat, "%q", bad)
	}
	f, err := segment.CompileFormat("ORD-{date}-{bucket:2}-{seq:10}")
	require.NoError(t, err)
	for _, bad := range []string{
		"", "ORD-20261129-07-12345", "ORX-20261129-07-0000012345", "ORD-20261329-07-0000012345",
		"ORD-20261129-7-0000012345", "ORD-20261129-07-0000012345x", "ORD-20261129-07-99999999999999999999",
	} {
		_, err := f.Parse(bad)
		require.ErrorIs(t, err, segment.ErrMalformedID, "%q", bad)
	}
}

func TestFormatBuckets(t *testing.T) {
	t.Parallel()
	cfg := segment.Config{Sources: []string{"postgres://x/seg"}, Tags: map[string]segment.TagConfig{
		"a": {Format: "A{bucket:2}{date}-{seq}", Buckets: 16},
	}}
	require.NoError(t, cfg.Validate())
	cfg.Tags["a"] = segment.TagConfig{Format: "A{bucket:1}-{seq}", Buckets: 11}
	require.ErrorIs(t, cfg.Validate(), segment.ErrConfig)
}

func FuzzFormatRoundTrip(f *testing.F) {
	f.Add("ORD-{date}-{bucket:2}-{seq:10}", int64(12345), "user")
	f.Add("{seq}", int64(0), "")
	f.Add("X{bucket:3}/{seq:4}", int64(1<<62), "k")
	f.Fuzz(func(t *testing.T, template string, seq int64, key string) {
		fm, err := segment.CompileFormat(template)
		if err != nil || seq < 0 {
			return
		}
		id := fm.Render(seq, day, key)
		parts, err := fm.Parse(id)
		if err != nil {
			t.Fatalf("%q renders %d as %q, which does not parse: %v", template, seq, id, err)
		}
		if parts.Seq != seq {
			t.Fatalf("%q: %q parsed to seq %d, want %d", template, id, parts.Seq, seq)
		}
	})
}

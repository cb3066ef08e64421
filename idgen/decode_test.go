package idgen_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
)

// vector is one published example of a scheme (testdata/ids/schemes.json).
type vector struct {
	Layout string         `json:"layout"`
	ID     string         `json:"id"`
	Epoch  int64          `json:"epoch"`
	Time   string         `json:"time"`
	Fields map[string]any `json:"fields"`
	Source string         `json:"source"`
}

func TestDecodePublishedExamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "ids", "schemes.json"))
	require.NoError(t, err)
	var vectors []vector
	require.NoError(t, json.Unmarshal(data, &vectors))
	covered := map[string]bool{}
	for _, v := range vectors {
		t.Run(v.Layout+"/"+v.ID, func(t *testing.T) {
			require.NotEmpty(t, v.Source)
			d, err := idgen.Decode(v.Layout, v.ID, v.Epoch)
			require.NoError(t, err)
			require.Equal(t, v.Time, d.Time.Format(idgen.TimeFormat))
			require.Len(t, d.Fields, len(v.Fields))
			// Through JSON, as `shardid id decode --json` prints it.
			out, err := json.Marshal(d)
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, json.Unmarshal(out, &got))
			require.Equal(t, v.Layout, got["layout"])
			require.Equal(t, v.Time, got["time"])
			for name, want := range v.Fields {
				require.Equal(t, want, got[name], name)
			}
			covered[v.Layout] = true
		})
	}
	for _, s := range idgen.Schemes() {
		require.True(t, covered[s], "no vector for %s", s)
	}
}

func TestDecodeRefusesWhatIsNotAnID(t *testing.T) {
	for _, tc := range []struct {
		layout, id string
		epoch      int64
		err        error
	}{
		{"nosuch", "1", 0, idgen.ErrUnknownScheme},
		{"uuidv7", "017F22E2-79B0-4CC3-98C4-DC0C0C07398F", 0, idgen.ErrMalformed}, // version 4
		{"uuidv7", "017F22E2-79B0-7CC3-C8C4-DC0C0C07398F", 0, idgen.ErrMalformed}, // variant 110
		{"uuidv7", "017F22E2-79B0-7CC3-98C4", 0, idgen.ErrMalformed},
		{"uuidv7", "017F22E2x79B0-7CC3-98C4-DC0C0C07398F", 0, idgen.ErrMalformed},
		{"uuidv7", "017F22E2-79B0-7CC3-98C4-DC0C0C07398F", 5, idgen.ErrInvalidLayout},
		{"ulid", "01ARZ3NDEKTSV4RRFFQ69G5FA", 0, idgen.ErrMalformed},
		{"ulid", "81ARZ3NDEKTSV4RRFFQ69G5FAV", 0, idgen.ErrMalformed}, // overflows 128 bits
		{"ulid", "01ARZ3NDEKTSV4RRFFQ69G5FAU", 0, idgen.ErrMalformed}, // U is not a digit
		{"objectid", "507c7f79bcf86cd7994f6c0", 0, idgen.ErrMalformed},
		{"objectid", "507c7f79bcf86cd7994f6c0g", 0, idgen.ErrMalformed},
		{"snowflake", "-1", 0, idgen.ErrNegativeID},
		{"snowflake", "12a", 0, idgen.ErrSyntax},
		{"sonyflake", "9223372036854775808", 0, idgen.ErrIDOutOfRange},
		{"instagram", "1", -5, idgen.ErrInvalidLayout},
	} {
		_, err := idgen.Decode(tc.layout, tc.id, tc.epoch)
		require.ErrorIs(t, err, tc.err, "%s %s", tc.layout, tc.id)
	}
}

func TestDecodeAcceptsCommonSpellings(t *testing.T) {
	for layout, ids := range map[string][]string{
		"uuidv7":   {"017f22e2-79b0-7cc3-98c4-dc0c0c07398f", "{017F22E2-79B0-7CC3-98C4-DC0C0C07398F}", "urn:uuid:017f22e2-79b0-7cc3-98c4-dc0c0c07398f", "017F22E279B07CC398C4DC0C0C07398F"},
		"ulid":     {"01arz3ndektsv4rrffq69g5fav"},
		"objectid": {`ObjectId("507c7f79bcf86cd7994f6c0e")`, "507C7F79BCF86CD7994F6C0E"},
	} {
		var first string
		for _, id := range ids {
			d, err := idgen.Decode(layout, id, 0)
			require.NoError(t, err, id)
			if first == "" {
				first = d.ID
			}
			require.Equal(t, first, d.ID, "normalised")
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{"017F22E2-79B0-7CC3-98C4-DC0C0C07398F", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "507c7f79bcf86cd7994f6c0e", "175928847299117063"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, layout := range idgen.Schemes() {
			d, err := idgen.Decode(layout, s, 0)
			if err != nil {
				continue
			}
			// What decodes, decodes again from its normal form to the same.
			again, err := idgen.Decode(layout, d.ID, 0)
			require.NoError(t, err)
			require.Equal(t, d, again)
		}
	})
}

// The scheme functions check the epoch as Decode does: a negative epoch,
// or one that leaves no room for the ids' time, is refused, not read.
func TestDecodeSchemeFunctionsCheckTheEpoch(t *testing.T) {
	for name, decode := range map[string]func(string, int64) (idgen.Decoded, error){
		"snowflake": idgen.DecodeSnowflake, "sonyflake": idgen.DecodeSonyflake,
	} {
		for _, epoch := range []int64{-5, math.MaxInt64} {
			_, err := decode("1", epoch)
			require.ErrorIs(t, err, idgen.ErrInvalidLayout, "%s epoch %d", name, epoch)
		}
		d, err := decode("1", 0)
		require.NoError(t, err, name)
		require.Equal(t, name, d.Scheme)
	}
}

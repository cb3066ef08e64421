package idgen

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want ID
		err  error
	}{
		{"0", 0, nil},
		{"1", 1, nil},
		{"4041150592192615424", 4041150592192615424, nil},
		{"9223372036854775807", math.MaxInt64, nil},
		{"007", 7, nil},
		{"9223372036854775808", 0, ErrIDOutOfRange},
		{"18446744073709551616", 0, ErrIDOutOfRange},
		{"99999999999999999999999999999", 0, ErrIDOutOfRange},
		{"-1", 0, ErrNegativeID},
		{"-0", 0, ErrNegativeID},
		{"-9223372036854775808", 0, ErrNegativeID},
		{"", 0, ErrSyntax},
		{"+1", 0, ErrSyntax},
		{" 1", 0, ErrSyntax},
		{"1 ", 0, ErrSyntax},
		{"1.5", 0, ErrSyntax},
		{"1.0", 0, ErrSyntax},
		{"1e3", 0, ErrSyntax},
		{"1E3", 0, ErrSyntax},
		{"0x10", 0, ErrSyntax},
		{"1_000", 0, ErrSyntax},
		{"abc", 0, ErrSyntax},
		{"١٢٣", 0, ErrSyntax}, // non-ASCII digits
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	_, err := Parse("1.5")
	require.EqualError(t, err, `idgen: not a decimal id: "1.5" has a fraction`)
	_, err = Parse("1e3")
	require.EqualError(t, err, `idgen: not a decimal id: "1e3" has an exponent`)
	_, err = Parse("-12")
	require.EqualError(t, err, `idgen: negative id: "-12" (ids are never negative)`)
	_, err = Parse("9223372036854775808")
	require.EqualError(t, err, `idgen: id out of range: "9223372036854775808" is above the largest id 9223372036854775807`)
	// A pasted essay stays a one-line error.
	_, err = Parse(string(make([]byte, 10000)))
	require.Less(t, len(err.Error()), 300)
}

func TestTextRoundTrip(t *testing.T) {
	for _, id := range []ID{0, 1, 1 << 53, 1<<53 + 1, 4041150592192615424, math.MaxInt64} {
		b, err := id.MarshalText()
		require.NoError(t, err)
		require.Equal(t, id.String(), string(b))

		var got ID
		require.NoError(t, got.UnmarshalText(b))
		require.Equal(t, id, got)
	}

	_, err := ID(-1).MarshalText()
	require.ErrorIs(t, err, ErrNegativeID)
	var id ID = 5
	require.ErrorIs(t, id.UnmarshalText([]byte("x")), ErrSyntax)
	require.Equal(t, ID(5), id, "a failed unmarshal leaves the id alone")
}

func TestMarshalJSON(t *testing.T) {
	type row struct {
		ID   ID   `json:"id"`
		Ref  *ID  `json:"ref,omitempty"`
		List []ID `json:"list"`
	}
	ref := ID(math.MaxInt64)
	b, err := json.Marshal(row{ID: 4041150592192615424, Ref: &ref, List: []ID{0, 9007199254740993}})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"4041150592192615424","ref":"9223372036854775807","list":["0","9007199254740993"]}`, string(b))

	// Map keys go through MarshalText.
	b, err = json.Marshal(map[ID]int{12: 1})
	require.NoError(t, err)
	require.Equal(t, `{"12":1}`, string(b))

	_, err = json.Marshal(ID(-1))
	require.ErrorIs(t, err, ErrNegativeID)
}

func TestUnmarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want ID
		err  error
	}{
		{"quoted", `"4041150592192615424"`, 4041150592192615424, nil},
		{"bare", `4041150592192615424`, 4041150592192615424, nil},
		{"bare above 2^53 keeps every digit", `9007199254740993`, 9007199254740993, nil},
		{"quoted max", `"9223372036854775807"`, math.MaxInt64, nil},
		{"bare max", `9223372036854775807`, math.MaxInt64, nil},
		{"zero", `0`, 0, nil},
		{"quoted zero", `"0"`, 0, nil},
		{"escaped digits", `"\u0031\u0032"`, 12, nil},
		{"surrounding space", " \"12\"\n", 12, nil},
		{"bare fraction", `1.5`, 0, ErrSyntax},
		{"bare integral fraction", `5.0`, 0, ErrSyntax},
		{"quoted fraction", `"1.5"`, 0, ErrSyntax},
		{"bare exponent", `1e3`, 0, ErrSyntax},
		{"bare exponent with sign", `1E+3`, 0, ErrSyntax},
		{"quoted exponent", `"1e3"`, 0, ErrSyntax},
		{"bare negative", `-1`, 0, ErrNegativeID},
		{"quoted negative", `"-1"`, 0, ErrNegativeID},
		{"bare out of range", `9223372036854775808`, 0, ErrIDOutOfRange},
		{"quoted out of range", `"9223372036854775808"`, 0, ErrIDOutOfRange},
		{"empty string", `""`, 0, ErrSyntax},
		{"quoted spaces", `" 12"`, 0, ErrSyntax},
		{"bool", `true`, 0, ErrSyntax},
		{"object", `{}`, 0, ErrSyntax},
		{"array", `[1]`, 0, ErrSyntax},
		{"unterminated string", `"12`, 0, ErrSyntax},
		{"empty input", ``, 0, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got ID
			err := got.UnmarshalJSON([]byte(tt.in))
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			// The same through encoding/json, inside a document.
			var doc struct{ ID ID }
			require.NoError(t, json.Unmarshal([]byte(`{"ID":`+tt.in+`}`), &doc))
			require.Equal(t, tt.want, doc.ID)
		})
	}

	// null is a no-op, as encoding/json expects of an Unmarshaler.
	id := ID(7)
	require.NoError(t, json.Unmarshal([]byte(`null`), &id))
	require.Equal(t, ID(7), id)

	// Through encoding/json the sentinel survives for callers to test.
	var doc struct{ ID ID }
	err := json.Unmarshal([]byte(`{"ID":1.5}`), &doc)
	require.ErrorIs(t, err, ErrSyntax)
}

func TestJSONRoundTrip(t *testing.T) {
	for _, id := range []ID{0, 1, 1<<53 + 1, 4041150592192615424, math.MaxInt64} {
		b, err := json.Marshal(id)
		require.NoError(t, err)
		require.Equal(t, `"`+id.String()+`"`, string(b))
		var got ID
		require.NoError(t, json.Unmarshal(b, &got))
		require.Equal(t, id, got)
	}
}

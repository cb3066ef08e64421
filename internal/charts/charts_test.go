package charts_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/charts"
	"github.com/shardid/shardid/internal/genbench"
)

// texts parses doc as XML and returns the content of its text elements.
func texts(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var out []string
	inText := false
	sawSVG := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG parses")
		switch el := tok.(type) {
		case xml.StartElement:
			sawSVG = sawSVG || el.Name.Local == "svg"
			inText = el.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				out = append(out, strings.TrimSpace(string(el)))
			}
		}
	}
	require.True(t, sawSVG, "an svg element")
	return out
}

func TestBenchSVGFromFixedNumbers(t *testing.T) {
	ms := time.Millisecond
	res := &genbench.Result{IDs: 1_000_000, Rounds: 1, Cases: []genbench.Case{
		{Name: genbench.CaseNextval, Median: 447 * ms},
		{Name: genbench.CaseSafe, Median: 1664 * ms},
		{Name: genbench.CaseInstagram, Median: 6523 * ms},
		{Name: genbench.CaseInsertSerial, Median: 2979 * ms},
		{Name: genbench.CaseInsertSafe, Median: 4409 * ms},
		{Name: genbench.CaseInsertInstagram, Median: 9679 * ms},
	}}
	var buf bytes.Buffer
	require.NoError(t, charts.BenchSVG(&buf, res))
	got := strings.Join(texts(t, buf.Bytes()), "|")
	for _, want := range []string{"nextval", "safe", "instagram", "bigserial", "safe DEFAULT", "instagram DEFAULT",
		"ids per second, one session", "bulk INSERT, rows per second",
		"601k", // 1,000,000 ids in 1664 ms, written above the safe bar
	} {
		require.Contains(t, got, want)
	}
}

func TestWriteSVGRefusesWhatItCannotDraw(t *testing.T) {
	require.Error(t, charts.WriteSVG(io.Discard))
	require.Error(t, charts.WriteSVG(io.Discard, charts.Panel{Title: "empty"}))
	require.Error(t, charts.WriteSVG(io.Discard, charts.Panel{Title: "neg", Bars: []charts.Bar{{"x", -1}}}))
}

func TestHuman(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 5.5: "5.50", 42: "42.0", 999: "999", 1500: "1.50k", 2_237_000: "2.24M", 3e9: "3.00G"} {
		require.Equal(t, want, charts.Human(v), v)
	}
}

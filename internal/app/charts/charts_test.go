package charts_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/charts"
	"github.com/shardid/shardid/internal/app/genbench"
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
	// A label too long for its bar's slot is drawn on two lines: two texts.
	for _, want := range []string{"nextval", "safe", "instagram", "bigserial", "safe|DEFAULT", "instagram|DEFAULT",
		"ids per second, one session", "bulk INSERT, rows per second",
		"601k", // 1,000,000 ids in 1664 ms, written above the safe bar
	} {
		require.Contains(t, got, want)
	}
}

// Each chart says what it was measured on, and a missed goal says so.
func TestBenchSVGCaptionAndGoals(t *testing.T) {
	ms := time.Millisecond
	res := &genbench.Result{IDs: 200_000, Rounds: 3, Server: "15.8 (Debian 15.8-0+deb12u1)", Machine: "linux/amd64, 2 CPUs (AMD EPYC 7B13)",
		SafeSpeedup: 3.92, InsertRatio: 1.61, Cases: []genbench.Case{
			{Name: genbench.CaseNextval, Median: 90 * ms},
			{Name: genbench.CaseSafe, Median: 330 * ms},
			{Name: genbench.CaseInstagram, Median: 1300 * ms},
			{Name: genbench.CaseInsertSerial, Median: 600 * ms},
			{Name: genbench.CaseInsertSafe, Median: 966 * ms},
			{Name: genbench.CaseInsertInstagram, Median: 1900 * ms},
		}}
	var buf bytes.Buffer
	require.NoError(t, charts.BenchSVG(&buf, res))
	got := strings.Join(texts(t, buf.Bytes()), "|")
	require.Contains(t, got, "PostgreSQL 15.8 (Debian 15.8-0+deb12u1), 200000 ids per case, median of 3 rounds, one session")
	require.Contains(t, got, "linux/amd64, 2 CPUs (AMD EPYC 7B13)")
	require.Contains(t, got, "safe vs instagram 3.92x (goal >= 2x)|")
	require.Contains(t, got, fmt.Sprintf("safe DEFAULT time / bigserial 1.61x (goal <= %gx): MISSED", genbench.GoalInsertRatio))
	require.NotContains(t, got, "3.92x (goal >= 2x): MISSED")
}

// The charts name a font stack every viewer has, never Liberation Serif
// alone: where Liberation is missing the text falls back to Arial,
// Helvetica or the generic sans-serif.
func TestChartsFontStack(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, charts.WriteFigure(&buf, charts.Figure{Caption: []string{"a caption"},
		Panels: []charts.Panel{{Title: "t", YLabel: "y", Bars: []charts.Bar{{"a", 1}, {"instagram DEFAULT", 2}}}}}))
	doc := buf.String()
	require.NotContains(t, doc, "Liberation Serif")
	families := regexp.MustCompile(`font-family:([^;"]*)`).FindAllStringSubmatch(doc, -1)
	require.NotEmpty(t, families)
	for _, f := range families {
		require.Equal(t, "'Liberation Sans',Arial,Helvetica,sans-serif", f[1])
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

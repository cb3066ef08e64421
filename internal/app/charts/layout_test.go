package charts

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Every bar's label, drawn in a font up to labelSlack times wider than
// Liberation Sans, fits its bar's slot: "instagram DEFAULT" is not
// clipped, and a move's eight phases do not run together. Long labels
// break at spaces; a panel widens when its labels still need it.
func TestLabelsFitTheirSlots(t *testing.T) {
	tick := draw.TextStyle{Font: font.From(textFont, tickFontSz), Handler: plot.DefaultTextHandler}
	for _, labels := range [][]string{
		{"bigserial", "safe DEFAULT", "instagram DEFAULT"},
		{"nextval", "safe", "instagram"},
		{"planned", "schema", "copy", "catchup", "fenced", "verified", "flipped", "cleaned"},
		{"nextval (bigserial)", "safe generator", "instagram function", "uuidv7() of shardid sql uuidv7", "gen_random_uuid()", "segment allocator"},
	} {
		bars := make([]Bar, len(labels))
		for i, l := range labels {
			bars[i] = Bar{Label: l, Value: float64(i + 1)}
		}
		pl, width, err := barPlot(Panel{Title: "t", Bars: bars})
		require.NoError(t, err)
		require.GreaterOrEqual(t, width, PanelWidth)
		slot := (width - yAxisWidth - 2*panelPad) / vg.Length(len(labels))
		ticks := pl.X.Tick.Marker.Ticks(pl.X.Min, pl.X.Max)
		var drawn []string
		for _, tk := range ticks {
			if tk.Label != "" {
				drawn = append(drawn, tk.Label)
			}
		}
		require.Len(t, drawn, len(labels))
		for i, l := range drawn {
			require.Equal(t, labels[i], strings.ReplaceAll(l, "\n", " "), "a label keeps its words")
			for _, line := range strings.Split(l, "\n") {
				require.LessOrEqual(t, tick.Width(line)*labelSlack, slot, "%q in a slot of %v", line, slot)
			}
		}
	}
	require.Equal(t, "instagram\nDEFAULT", labelLines("instagram DEFAULT", 2*vg.Centimeter, draw.TextStyle{Font: font.From(textFont, tickFontSz), Handler: plot.DefaultTextHandler}.Width))
}

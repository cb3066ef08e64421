package charts

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Bar is one labelled value.
type Bar struct {
	Label string
	Value float64
}

// Panel is one bar chart.
type Panel struct {
	Title string
	// YLabel names the axis, unit included ("ids per second").
	YLabel string
	Bars   []Bar
	// Format renders a value above its bar; nil means Human.
	Format func(float64) string
}

// Size of one panel: its height, and its width unless its bars need more
// (see panelWidth).
const (
	PanelWidth  = 11 * vg.Centimeter
	PanelHeight = 9 * vg.Centimeter
)

// Figure is a row of panels with a caption under them: what the figures
// were measured on (server version, run size, machine), one line each.
type Figure struct {
	Panels  []Panel
	Caption []string
}

// The figures are drawn with Liberation Sans's metrics and name a font
// stack every viewer has: Liberation Sans is metric-compatible with Arial
// and Helvetica, and a viewer with none of them falls back to its generic
// sans-serif. The layout leaves labelSlack room around each bar label, so
// that a fallback wider than Liberation Sans (DejaVu Sans is about 15%
// wider) still fits and neighbouring labels never run together.
var (
	textFont  = font.Font{Typeface: "Liberation", Variant: "Sans"}
	fontStack = `font-family:'Liberation Sans',Arial,Helvetica,sans-serif;`
)

const labelSlack = 1.35

// Layout sizes.
const (
	yAxisWidth    = 2.3 * vg.Centimeter // the y axis, its label and ticks
	captionLine   = 0.5 * vg.Centimeter
	captionFontSz = 8
	tickFontSz    = 10
	panelPad      = 3 * vg.Millimeter
)

// WriteSVG draws panels side by side into one SVG document on w.
func WriteSVG(w io.Writer, panels ...Panel) error {
	return WriteFigure(w, Figure{Panels: panels})
}

// WriteFigure draws f's panels side by side, each as wide as its bars'
// labels need, and its caption under them, into one SVG document on w.
func WriteFigure(w io.Writer, f Figure) error {
	lay, err := layout(f)
	if err != nil {
		return err
	}
	c := vgsvg.New(lay.width, lay.height)
	lay.draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	// vgsvg names the one family it drew with; name the stack instead.
	svg := strings.ReplaceAll(buf.String(), "font-family:Liberation Sans;", fontStack)
	_, err = io.WriteString(w, svg)
	return err
}

// figureLayout is a figure's plots and where they go.
type figureLayout struct {
	plots         []*plot.Plot
	widths        []vg.Length
	caption       []string
	captionH      vg.Length
	width, height vg.Length
	capStyle      draw.TextStyle
}

func layout(f Figure) (*figureLayout, error) {
	if len(f.Panels) == 0 {
		return nil, errors.New("charts: no panels")
	}
	lay := &figureLayout{plots: make([]*plot.Plot, len(f.Panels)), widths: make([]vg.Length, len(f.Panels)), caption: f.Caption,
		capStyle: draw.TextStyle{Color: color.Black, Font: font.From(textFont, captionFontSz), Handler: plot.DefaultTextHandler}}
	for i, p := range f.Panels {
		var err error
		if lay.plots[i], lay.widths[i], err = barPlot(p); err != nil {
			return nil, fmt.Errorf("charts: %s: %w", p.Title, err)
		}
		lay.width += lay.widths[i]
	}
	if len(f.Caption) > 0 {
		lay.captionH = captionLine*vg.Length(len(f.Caption)) + panelPad
	}
	// Wide enough for the caption's longest line too.
	for _, line := range f.Caption {
		lay.width = max(lay.width, lay.capStyle.Width(line)*labelSlack+2*panelPad)
	}
	lay.height = PanelHeight + lay.captionH
	return lay, nil
}

func (lay *figureLayout) draw(dc draw.Canvas) {
	x := vg.Length(0)
	for i, p := range lay.plots {
		area := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x + panelPad, Y: lay.captionH + panelPad},
			Max: vg.Point{X: x + lay.widths[i] - panelPad, Y: lay.captionH + PanelHeight - panelPad},
		}}
		p.Draw(area)
		x += lay.widths[i]
	}
	for i, line := range lay.caption {
		y := lay.captionH - captionLine*vg.Length(i+1) + captionLine/4
		dc.FillText(lay.capStyle, vg.Point{X: panelPad, Y: y}, line)
	}
}

// labelLines breaks a bar's label into lines at its spaces when it is
// wider than slot (each line as full as fits), so that a long label takes
// two short lines under its bar rather than the room of its neighbours.
func labelLines(label string, slot vg.Length, width func(string) vg.Length) string {
	if width(label)*labelSlack <= slot {
		return label
	}
	words := strings.Fields(label)
	var lines []string
	cur := ""
	for _, w := range words {
		next := strings.TrimSpace(cur + " " + w)
		if cur != "" && width(next)*labelSlack > slot {
			lines = append(lines, cur)
			next = w
		}
		cur = next
	}
	return strings.Join(append(lines, cur), "\n")
}

// panelWidth is how wide a panel of labels (already broken into lines)
// must be: PanelWidth, or more when a label's widest line, with
// labelSlack to spare, does not fit its bar's slot.
func panelWidth(labels []string, width func(string) vg.Length) vg.Length {
	var widest vg.Length
	for _, l := range labels {
		for _, line := range strings.Split(l, "\n") {
			widest = max(widest, width(line))
		}
	}
	need := yAxisWidth + 2*panelPad + vg.Length(len(labels))*(widest*labelSlack+2*vg.Millimeter)
	return max(PanelWidth, need)
}

// slotWidth is the room each of n bars has in a panel of PanelWidth.
func slotWidth(n int) vg.Length {
	return (PanelWidth - yAxisWidth - 2*panelPad) / vg.Length(max(n, 1))
}

func barPlot(p Panel) (*plot.Plot, vg.Length, error) {
	if len(p.Bars) == 0 {
		return nil, 0, errors.New("no bars")
	}
	format := p.Format
	if format == nil {
		format = Human
	}
	tick := draw.TextStyle{Font: font.From(textFont, tickFontSz), Handler: plot.DefaultTextHandler}
	values := make(plotter.Values, len(p.Bars))
	names := make([]string, len(p.Bars))
	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(p.Bars)), Labels: make([]string, len(p.Bars))}
	top := 0.0
	for i, b := range p.Bars {
		if math.IsNaN(b.Value) || math.IsInf(b.Value, 0) || b.Value < 0 {
			return nil, 0, fmt.Errorf("bar %s: value %v", b.Label, b.Value)
		}
		values[i], names[i] = b.Value, labelLines(b.Label, slotWidth(len(p.Bars)), tick.Width)
		labels.XYs[i] = plotter.XY{X: float64(i), Y: b.Value}
		labels.Labels[i] = format(b.Value)
		top = max(top, b.Value)
	}
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.Title.TextStyle.Font = font.From(textFont, 12)
	pl.Y.Label.Text = p.YLabel
	pl.Y.Label.TextStyle.Font = font.From(textFont, 12)
	pl.X.Tick.Label.Font = tick.Font
	pl.Y.Tick.Label.Font = tick.Font
	pl.Y.Min, pl.Y.Max = 0, top*1.15+1e-9 // room for the values above the bars
	pl.Y.Tick.Marker = humanTicks{}
	bars, err := plotter.NewBarChart(values, vg.Points(28))
	if err != nil {
		return nil, 0, err
	}
	bars.LineStyle.Width = 0
	bars.Color = barColor
	pl.Add(bars)
	text, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, 0, err
	}
	for i := range text.TextStyle {
		text.TextStyle[i].XAlign = draw.XCenter
		text.TextStyle[i].Font = tick.Font
	}
	text.Offset = vg.Point{Y: vg.Points(3)}
	pl.Add(text)
	pl.NominalX(names...)
	// Each bar in the middle of its slot, the outer ones too.
	pl.X.Min, pl.X.Max = -0.5, float64(len(p.Bars))-0.5
	width := panelWidth(names, tick.Width)
	for _, line := range strings.Split(p.Title, "\n") {
		width = max(width, pl.Title.TextStyle.Width(line)*labelSlack+2*panelPad)
	}
	return pl, width, nil
}

// Human renders a value with a k/M/G suffix and three significant digits.
func Human(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trim(v/1e9) + "G"
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "k"
	}
	return trim(v)
}

func trim(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

var barColor = color.RGBA{R: 0x3b, G: 0x6e, B: 0xa8, A: 0xff}

// humanTicks labels the default ticks with Human.
type humanTicks struct{}

func (humanTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = Human(ticks[i].Value)
		}
	}
	return ticks
}

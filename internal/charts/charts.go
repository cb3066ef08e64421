// Package charts draws the project's figures as SVG with gonum.org/v1/plot
// (pure Go, no cgo), for docs/ and `shardid bench --svg`.
//
// A figure is a row of panels, each a bar chart of labelled values with
// the value written above its bar:
//
//	err := charts.WriteSVG(w, charts.Panel{Title: "ids per second", Bars: bars})
package charts

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
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

// Size of one panel.
const (
	PanelWidth  = 11 * vg.Centimeter
	PanelHeight = 9 * vg.Centimeter
)

// WriteSVG draws panels side by side into one SVG document on w.
func WriteSVG(w io.Writer, panels ...Panel) error {
	if len(panels) == 0 {
		return errors.New("charts: no panels")
	}
	plots := make([]*plot.Plot, len(panels))
	for i, p := range panels {
		var err error
		if plots[i], err = barPlot(p); err != nil {
			return fmt.Errorf("charts: %s: %w", p.Title, err)
		}
	}
	c := vgsvg.New(PanelWidth*vg.Length(len(panels)), PanelHeight)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Centimeter,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, draw.New(c))
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	_, err := c.WriteTo(w)
	return err
}

func barPlot(p Panel) (*plot.Plot, error) {
	if len(p.Bars) == 0 {
		return nil, errors.New("no bars")
	}
	format := p.Format
	if format == nil {
		format = Human
	}
	values := make(plotter.Values, len(p.Bars))
	names := make([]string, len(p.Bars))
	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(p.Bars)), Labels: make([]string, len(p.Bars))}
	top := 0.0
	for i, b := range p.Bars {
		if math.IsNaN(b.Value) || math.IsInf(b.Value, 0) || b.Value < 0 {
			return nil, fmt.Errorf("bar %s: value %v", b.Label, b.Value)
		}
		values[i], names[i] = b.Value, b.Label
		labels.XYs[i] = plotter.XY{X: float64(i), Y: b.Value}
		labels.Labels[i] = format(b.Value)
		top = max(top, b.Value)
	}
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.Y.Label.Text = p.YLabel
	pl.Y.Min, pl.Y.Max = 0, top*1.15+1e-9 // room for the values above the bars
	pl.Y.Tick.Marker = humanTicks{}
	bars, err := plotter.NewBarChart(values, vg.Points(28))
	if err != nil {
		return nil, err
	}
	bars.LineStyle.Width = 0
	bars.Color = barColor
	pl.Add(bars)
	text, err := plotter.NewLabels(labels)
	if err != nil {
		return nil, err
	}
	for i := range text.TextStyle {
		text.TextStyle[i].XAlign = draw.XCenter
	}
	text.Offset = vg.Point{Y: vg.Points(3)}
	pl.Add(text)
	pl.NominalX(names...)
	return pl, nil
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

// Package charts draws the project's figures as SVG with gonum.org/v1/plot
// (pure Go, no cgo), for docs/ and `shardid bench --svg`.
//
// A figure is a row of panels, each a bar chart of labelled values with
// the value written above its bar, and a caption saying what it was
// measured on:
//
//	err := charts.WriteFigure(w, charts.Figure{
//		Panels:  []charts.Panel{{Title: "ids per second", Bars: bars}},
//		Caption: []string{"PostgreSQL 15.8, 200000 ids per case", genbench.Machine()},
//	})
//
// It is one of the CLI's tools (internal/app). cmd/shardid links it, and
// gonum with it, only when built with -tags charts: the operator's binary
// carries no plotting code.
package charts

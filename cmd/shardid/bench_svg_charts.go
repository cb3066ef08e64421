//go:build charts

package main

import (
	"os"

	"github.com/shardid/shardid/internal/app/charts"
	"github.com/shardid/shardid/internal/app/genbench"
)

// chartsFor says whether this build can draw bench --svg: it can, it was
// built with -tags charts.
func chartsFor(string) error { return nil }

// writeBenchSVG draws res into the file at path (bench --svg).
func writeBenchSVG(path string, res *genbench.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := charts.BenchSVG(f, res); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

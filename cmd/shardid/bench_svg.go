package main

import (
	"os"

	"github.com/shardid/shardid/internal/charts"
	"github.com/shardid/shardid/internal/genbench"
)

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

//go:build !charts

package main

import "github.com/shardid/shardid/internal/app/genbench"

// The charts (package charts and the 14 gonum packages it links) stay out
// of the default build, as golang-migrate keeps its drivers behind tags:
// the operator's binary has no use for them. bench --svg in this build
// says in one line how to get them, before it measures anything.

// chartsHow is the one line that bench --svg FILE prints in a build without
// the charts.
const chartsHow = "bench --svg draws with the charts, which this build leaves out: go run -tags charts ./cmd/shardid bench --svg %s"

// chartsFor refuses bench --svg path: a usage error (exit 2).
func chartsFor(path string) error { return usagef(chartsHow, path) }

// writeBenchSVG is never reached: chartsFor refused --svg first.
func writeBenchSVG(path string, _ *genbench.Result) error { return chartsFor(path) }

//go:build !charts

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// In a default build bench --svg FILE says in one line how to get the
// charts and exits 2, before it starts a server or measures anything, and
// writes no file.
func TestBenchSVGWithoutChartsSaysHow(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "bench.svg")
	out, err := runShardid(t, "bench", "--ids", "10", "--svg", svg)
	require.Error(t, err)
	require.Empty(t, out)
	require.Equal(t, 2, exitCode(err))
	msg := oneLine(errorWithHint(err))
	require.Equal(t, msg, err.Error(), "one line")
	require.Contains(t, msg, "go run -tags charts ./cmd/shardid bench --svg "+svg)
	require.NotContains(t, err.Error(), "\n")
	_, statErr := os.Stat(svg)
	require.ErrorIs(t, statErr, os.ErrNotExist, "no file is written")
}

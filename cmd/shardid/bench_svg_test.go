package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The operator's binary, built without tags, links none of the charts:
// no gonum package, not package charts. A build with -tags charts still
// compiles, so bench --svg keeps working where it is asked for.
func TestDefaultBuildLeavesOutTheCharts(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=") // the default build, whatever the caller's flags
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/shardid/shardid/internal/app/genbench", "go list -deps lists what the binary links")
	for _, d := range deps {
		require.False(t, strings.HasPrefix(d, "gonum.org/"), "the default build links %s", d)
		require.NotEqual(t, "github.com/shardid/shardid/internal/app/charts", d, "the default build links the charts")
	}

	if testing.Short() {
		t.Skip("-short: compiles the build with -tags charts")
	}
	build := exec.Command("go", "build", "-tags", "charts", "-o", os.DevNull, ".")
	out, err = build.CombinedOutput()
	require.NoError(t, err, "go build -tags charts: %s", out)
	out, err = exec.Command("go", "list", "-deps", "-tags", "charts", ".").Output()
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(out)), "github.com/shardid/shardid/internal/app/charts", "-tags charts links the charts")
}

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

func TestVersion(t *testing.T) {
	out, code := runClusterCmd(t, "--version")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasPrefix(out, "shardid "), out)
	require.Contains(t, out, runtime.Version())
	require.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)

	out, code = runClusterCmd(t, "version")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("catalog schema: %d", shardmgr.CatalogSchema))
	require.Contains(t, out, "generator:      v3") // v3: the pull-up asks for the extension's raise only where its schema exists (issue 29)

	out, code = runClusterCmd(t, "version", "--json")
	require.Equal(t, 0, code, out)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	for _, k := range []string{"version", "go", "catalog_schema", "generator"} {
		require.Contains(t, v, k)
	}
	require.EqualValues(t, shardmgr.CatalogSchema, v["catalog_schema"])

	_, code = runClusterCmd(t, "version", "extra")
	require.Equal(t, 2, code)
}

// TestVersionStamped builds the binary as `make release` does and checks
// that the stamped version is what it prints.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "shardid")
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-X github.com/shardid/shardid/internal/app/buildinfo.stamped=v1.2.3", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "shardid v1.2.3, "+runtime.Version()+"\n", string(out))
}

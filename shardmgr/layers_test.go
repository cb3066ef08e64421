package shardmgr_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOperatorSiblingsImportNoSibling: install, verify, migrate,
// rebalance, hosts and repair share the engine below them (shardmgr/internal/...), never one
// another, so that each can change without the others (issue 19, item 4).
// Test files may import a sibling to set a cluster up; only the packages
// themselves are checked.
func TestOperatorSiblingsImportNoSibling(t *testing.T) {
	const mod = "github.com/shardid/shardid/shardmgr/"
	siblings := []string{mod + "install", mod + "verify", mod + "migrate", mod + "rebalance", mod + "hosts", mod + "repair"}
	out, err := exec.Command("go", "list", "-json", "./install", "./verify", "./migrate", "./rebalance", "./hosts", "./repair").Output()
	require.NoError(t, err)

	dec := json.NewDecoder(bytes.NewReader(out))
	seen := map[string][]string{}
	for {
		var p struct {
			ImportPath string
			Imports    []string // the package's own files, not its tests
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		seen[p.ImportPath] = p.Imports
	}
	require.Len(t, seen, len(siblings))
	for _, pkg := range siblings {
		imports, ok := seen[pkg]
		require.True(t, ok, "go list did not list %s", pkg)
		require.Contains(t, imports, "github.com/shardid/shardid/shardmgr", "%s: imports not read", pkg)
		for _, other := range siblings {
			if other != pkg {
				require.False(t, slices.Contains(imports, other), "%s imports its sibling %s", pkg, other)
			}
		}
	}
}

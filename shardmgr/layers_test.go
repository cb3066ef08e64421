package shardmgr_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shardmgrPath is this package's import path; the layers are named from it.
const shardmgrPath = "github.com/shardid/shardid/shardmgr"

// listedPkg is what `go list -json` says of one package.
type listedPkg struct {
	ImportPath string
	Imports    []string // the package's own files, not its tests
	Deps       []string // everything they link, through any package
	Error      *struct{ Err string }
}

// listShardmgr lists the packages of shardmgr (run from this directory).
func listShardmgr(t *testing.T, patterns ...string) map[string]listedPkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Imports,Deps,Error"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	pkgs := map[string]listedPkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		require.Nil(t, p.Error, "go list %s", p.ImportPath)
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// The layers of the shard manager, from the ground up. A package's own
// code imports, even through another package, only its own layer and
// those below it; tests may import anything.
const (
	layerBase     = iota // shardmgr/internal/base/...: pg, limits, fence, grants, shardschema, ternsplit
	layerRoot            // shardmgr: the router and the types every layer above uses
	layerHandle          // shardmgr/cluster: the operator's handle
	layerEngine          // shardmgr/internal/engine/... and the migration engine, shardmgr/migrate
	layerOperator        // install, verify, rebalance, hosts, repair, audit
	layerTestkit         // shardmgr/internal/testkit/...: fixtures, for _test.go files only
)

var layerNames = []string{"base", "root", "handle", "engine", "operator", "testkit"}

// layerOf places a package of shardmgr; ok is false for one under
// shardmgr/internal that lies in no layer folder (a new package must say
// where it stands by where it is put).
func layerOf(path string) (layer int, ok bool) {
	rel, _ := strings.CutPrefix(path, shardmgrPath)
	rel = strings.TrimPrefix(rel, "/")
	under := func(dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }
	switch {
	case rel == "":
		return layerRoot, true
	case under("internal/base"):
		return layerBase, true
	case under("cluster"):
		return layerHandle, true
	// The migration engine is public, shardmgr/migrate: its types are in
	// the options of install and rebalance, which run it (issue 31, item 3).
	case under("internal/engine"), rel == "migrate":
		return layerEngine, true
	case under("internal/testkit"):
		return layerTestkit, true
	case under("internal"):
		return 0, false
	default:
		return layerOperator, true
	}
}

// TestLayers: no package of shardmgr imports, even through another
// package, one of a higher layer: base never the root or the engine, the
// root never the handle or the engine, the engine never an operator
// package, and no package's own code a test fixture. Otherwise the root
// would link the engine that is built on it, and a program that imports
// shardmgr would link test servers. shardmgr/internal/*/doc.go say the
// same of each layer folder.
func TestLayers(t *testing.T) {
	pkgs := listShardmgr(t, "./...")
	short := func(path string) string { return strings.TrimPrefix(path, "github.com/shardid/shardid/") }
	inShardmgr := func(path string) bool { return path == shardmgrPath || strings.HasPrefix(path, shardmgrPath+"/") }
	var breaches []string
	seen := map[int][]string{}
	for _, path := range slices.Sorted(maps.Keys(pkgs)) {
		p := pkgs[path]
		layer, ok := layerOf(path)
		if !ok {
			breaches = append(breaches, fmt.Sprintf("%s lies in no layer folder of shardmgr/internal (base, engine, testkit)", short(path)))
			continue
		}
		seen[layer] = append(seen[layer], short(path))
		for _, d := range p.Deps {
			if !inShardmgr(d) {
				continue
			}
			l, ok := layerOf(d)
			if !ok || l <= layer {
				continue
			}
			how := " through a package outside shardmgr"
			if i := slices.IndexFunc(p.Imports, func(i string) bool { return i == d || slices.Contains(pkgs[i].Deps, d) }); i >= 0 && p.Imports[i] == d {
				how = ""
			} else if i >= 0 {
				how = " through " + short(p.Imports[i])
			}
			breaches = append(breaches, fmt.Sprintf("%s (%s) imports %s (%s)%s", short(path), layerNames[layer], short(d), layerNames[l], how))
		}
	}
	require.Empty(t, breaches, "%s\na layer of shardmgr imports one above it (base < root < handle < engine < operator < testkit; see shardmgr/internal/*/doc.go)", strings.Join(breaches, "\n"))

	// The check sees the packages it is about, each in its layer ...
	require.Contains(t, seen[layerBase], "shardmgr/internal/base/pg")
	require.Contains(t, seen[layerRoot], "shardmgr")
	require.Contains(t, seen[layerHandle], "shardmgr/cluster")
	require.Contains(t, seen[layerEngine], "shardmgr/internal/engine/catalog")
	require.Contains(t, seen[layerEngine], "shardmgr/migrate")
	require.Contains(t, seen[layerOperator], "shardmgr/install")
	require.Contains(t, seen[layerTestkit], "shardmgr/internal/testkit/clustertest")
	// ... and it reads imports: the root imports the base, the engine the root.
	require.Contains(t, pkgs[shardmgrPath].Imports, shardmgrPath+"/internal/base/pg")
	require.Contains(t, pkgs[shardmgrPath+"/internal/engine/catalog"].Imports, shardmgrPath)
	require.Contains(t, pkgs[shardmgrPath+"/install"].Imports, shardmgrPath+"/migrate")
}

// TestOperatorSiblingsImportNoSibling: install, verify, rebalance, hosts
// and repair share the layers below them (the engine, shardmgr/migrate
// and shardmgr/internal/engine/..., the handle, the root and the base),
// never one another, so that each can change without the others (issue
// 19, item 4). Test files may import a sibling to set a cluster up; only
// the packages themselves are checked.
func TestOperatorSiblingsImportNoSibling(t *testing.T) {
	const mod = shardmgrPath + "/"
	siblings := []string{mod + "install", mod + "verify", mod + "rebalance", mod + "hosts", mod + "repair"}
	seen := listShardmgr(t, "./install", "./verify", "./rebalance", "./hosts", "./repair")
	require.Len(t, seen, len(siblings))
	for _, pkg := range siblings {
		p, ok := seen[pkg]
		require.True(t, ok, "go list did not list %s", pkg)
		require.Contains(t, p.Imports, shardmgrPath, "%s: imports not read", pkg)
		for _, other := range siblings {
			if other != pkg {
				require.False(t, slices.Contains(p.Imports, other), "%s imports its sibling %s", pkg, other)
			}
		}
	}
}

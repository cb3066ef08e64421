package internal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath   string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// goList lists the packages of this module that patterns name (run from
// this directory).
func goList(t *testing.T, patterns ...string) []listed {
	t.Helper()
	args := append([]string{"list", "-e", "-json=ImportPath,Imports,Deps,TestImports,XTestImports,Error"}, patterns...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		require.Nil(t, p.Error, "go list %s", p.ImportPath)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// modulePath is this module's path (go list -m).
func modulePath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// A foundation (a package under internal/ outside internal/app) never
// imports, even through another package, what is built on it: the shard
// manager, the id services or the CLI's tools. Its tests do not import
// them either. Otherwise a library that takes pgsession or localpg would
// link the whole CLI, and an import cycle waits for the next change.
func TestFoundationsImportNothingBuiltOnThem(t *testing.T) {
	module := modulePath(t)
	pkgs := goList(t, "./...")
	under := func(path, pkg string) bool { return path == pkg || strings.HasPrefix(path, pkg+"/") }
	above := []string{module + "/shardmgr", module + "/idgen/segment", module + "/idgen/snowflake", module + "/internal/app"}
	builtOn := func(path string) bool {
		return slices.ContainsFunc(above, func(pkg string) bool { return under(path, pkg) })
	}

	byPath := map[string]listed{}
	for _, p := range goList(t, "-deps", "./...") {
		byPath[p.ImportPath] = p
	}
	short := func(path string) string { return strings.TrimPrefix(path, module+"/") }
	var foundations, apps, breaches []string
	for _, p := range pkgs {
		rel := short(p.ImportPath)
		if under(p.ImportPath, module+"/internal/app") {
			apps = append(apps, rel)
			continue
		}
		foundations = append(foundations, rel)
		var wrong []string // its own imports that are, or bring in, what is built on it
		for _, i := range p.Imports {
			if builtOn(i) || slices.ContainsFunc(byPath[i].Deps, builtOn) {
				wrong = append(wrong, short(i))
			}
		}
		if len(wrong) > 0 {
			breaches = append(breaches, fmt.Sprintf("%s imports %s", rel, strings.Join(wrong, ", ")))
		}
		for _, d := range slices.Concat(p.TestImports, p.XTestImports) {
			if builtOn(d) {
				breaches = append(breaches, fmt.Sprintf("the tests of %s import %s", rel, short(d)))
			}
		}
	}
	require.Empty(t, breaches, "a foundation (internal/ outside internal/app) must not import what is built on it: move the package to internal/app, or move what it needs down")
	// The check sees the packages it is about: the foundations and the
	// tools are where the layout says.
	for _, f := range []string{"internal/pgsession", "internal/pgdatabase", "internal/localpg", "internal/localpg/pgtest"} {
		require.Contains(t, foundations, f)
	}
	for _, a := range []string{"internal/app/demo", "internal/app/localcluster", "internal/app/charts", "internal/app/genbench", "internal/app/schemebench", "internal/app/schematest", "internal/app/buildinfo"} {
		require.Contains(t, apps, a)
	}
	// and it reads imports: a tool does import the shard manager.
	demo := slices.IndexFunc(pkgs, func(p listed) bool { return p.ImportPath == module+"/internal/app/demo" })
	require.True(t, slices.ContainsFunc(pkgs[demo].Deps, builtOn), "internal/app/demo imports shardmgr")
}

// The CLI's tools are for the CLI: no library (the root package, shardmgr,
// idgen, sql, migrations, the foundations) links one. Tests may use them.
func TestOnlyTheCLIImportsTheTools(t *testing.T) {
	module := modulePath(t)
	pkgs := goList(t, "../...")
	under := func(path, pkg string) bool { return path == pkg || strings.HasPrefix(path, pkg+"/") }
	tools := module + "/internal/app"
	var breaches []string
	seen := 0
	for _, p := range pkgs {
		if under(p.ImportPath, module+"/cmd") || under(p.ImportPath, tools) {
			seen += len(slices.DeleteFunc(slices.Clone(p.Imports), func(i string) bool { return !under(i, tools) }))
			continue
		}
		for _, i := range p.Imports {
			if under(i, tools) {
				breaches = append(breaches, fmt.Sprintf("%s imports %s", strings.TrimPrefix(p.ImportPath, module+"/"), strings.TrimPrefix(i, module+"/")))
			}
		}
	}
	require.Positive(t, seen, "cmd/shardid imports the tools: the check reads imports")
	require.Empty(t, breaches, "only cmd/ and the tools themselves import internal/app")
}

package catalog

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule this file holds (doc.go): outside the catalog's migrations,
// the catalog's tables are written only by this package's functions.

// writerExceptions are the Go files outside this package that may write a
// catalog table, with the reason. The catalog's migrations
// (migrations/catalog/*.sql), which create the tables and change them
// with the schema, are the rule's own exception and are not Go.
var writerExceptions = map[string]string{
	"internal/app/schematest/schematest.go": "a test fixture: the catalog migration a newer shardid would ship, which raises catalog_readers.min_reader as a migration does",
}

// sqlWrite is an SQL statement that writes a table of schema shardid
// (its name in group 1): INSERT, UPDATE, DELETE, MERGE, TRUNCATE, or a
// COPY into it.
var sqlWrite = regexp.MustCompile(`(?is)\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE(?:\s+TABLE)?|COPY)\s+(?:ONLY\s+)?"?shardid"?\s*\.\s*"?([a-z_][a-z0-9_]*)"?(?:\s*\([^)]*\))?(\s+FROM)?`)

// TestCatalogHasOneWriter: no Go file of the repository outside this
// package (tests aside, and the exceptions above) holds an SQL string
// that writes a catalog table (every table migrations/catalog creates),
// nor names one as an identifier (pgx.Identifier{"shardid", ...}, which
// CopyFrom takes). Strings are read as the parser gives them, joined
// where they are concatenated, with the string constants they name put
// in.
func TestCatalogHasOneWriter(t *testing.T) {
	here, err := os.Getwd()
	require.NoError(t, err)
	root := here
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		require.NotEqual(t, root, parent, "no go.mod above %s", here)
		root = parent
	}
	tables := catalogTables(t, filepath.Join(root, "migrations", "catalog"))
	require.Subset(t, tables, []string{"cluster", "changes", "shards", "hosts", "moves"}, "the tables read from migrations/catalog")

	files := goSources(t, root)
	require.Greater(t, len(files), 100, "the repository's Go files")
	found := writes(t, files, tables)
	excepted := map[string]bool{}
	var outside []string
	for _, w := range found {
		rel, err := filepath.Rel(root, w.file)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		switch {
		case filepath.Dir(w.file) == here:
		case writerExceptions[rel] != "":
			excepted[rel] = true
		default:
			outside = append(outside, rel+":"+strconv.Itoa(w.line)+": "+w.what)
		}
	}
	require.Empty(t, outside, "catalog tables written outside package catalog (%s): add a named, documented function there and call it:\n%s", here, strings.Join(outside, "\n"))
	for f := range writerExceptions {
		require.True(t, excepted[f], "%s is listed as an exception but writes no catalog table: take it off the list", f)
	}
}

// TestCatalogWriterScan: the scan finds a write however the string is
// spelled (quoted names, a COPY into, a concatenation with a constant,
// an identifier), and not a read, a lock or another schema's table.
func TestCatalogWriterScan(t *testing.T) {
	src := `package p
const moves = "shardid.moves"
const prefix = "UPDATE "
func f() {
	_ = "update  shardid.shards set host = $1"
	_ = "INSERT INTO \"shardid\".\"hosts\" (name) VALUES ($1)"
	_ = "COPY shardid.changes (generation, what) FROM STDIN"
	_ = "DELETE FROM " + moves + " WHERE id = $1"
	_ = prefix + "shardid.cluster SET generation = 1"
	_ = pgx.Identifier{"shardid", "shards"}
	_ = "TRUNCATE shardid.console_audit"
	_ = "SELECT generation FROM shardid.cluster FOR UPDATE"
	_ = "COPY shardid.moves TO STDOUT"
	_ = "INSERT INTO shardid.local_shards (shard) VALUES (1)"
	_ = "INSERT INTO other.moves (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET id = 2"
	_ = "LOCK TABLE " + moves
}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "p.go")
	require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
	var lines []int
	for _, w := range writes(t, []string{file}, []string{"shards", "hosts", "changes", "moves", "cluster", "console_audit"}) {
		lines = append(lines, w.line)
	}
	require.Equal(t, []int{5, 6, 7, 8, 9, 10, 11}, lines)
}

// catalogTables lists the tables the catalog's migrations create.
func catalogTables(t *testing.T, dir string) []string {
	t.Helper()
	create := regexp.MustCompile(`(?i)CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?shardid\.([a-z_][a-z0-9_]*)`)
	ups, err := filepath.Glob(filepath.Join(dir, "*.up.sql"))
	require.NoError(t, err)
	var out []string
	for _, f := range ups {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range create.FindAllStringSubmatch(string(b), -1) {
			out = append(out, strings.ToLower(m[1]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// goSources lists the repository's Go files but tests, below root.
func goSources(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			out = append(out, path)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// write is a catalog table's write found in a Go file.
type write struct {
	file string
	line int
	what string
}

// writes finds the writes of tables in files (each package's string
// constants resolved within its folder; a qualified one by its name).
func writes(t *testing.T, files, tables []string) []write {
	t.Helper()
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	local := map[string]map[string]string{} // folder -> constant -> value
	global := map[string][]string{}         // constant -> values anywhere
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		parsed[f] = af
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if v, ok := literal(vs.Values[i], nil); ok {
						dir := filepath.Dir(f)
						if local[dir] == nil {
							local[dir] = map[string]string{}
						}
						local[dir][name.Name] = v
						global[name.Name] = append(global[name.Name], v)
					}
				}
			}
		}
	}
	isTable := map[string]bool{}
	for _, tb := range tables {
		isTable[tb] = true
	}
	var out []write
	for _, f := range files {
		consts := local[filepath.Dir(f)]
		resolve := func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.Ident:
				v, ok := consts[e.Name]
				return v, ok
			case *ast.SelectorExpr:
				if vs := global[e.Sel.Name]; len(vs) == 1 {
					return vs[0], true
				}
			}
			return "", false
		}
		seen := map[int]bool{}
		add := func(pos token.Pos, what string) {
			line := fset.Position(pos).Line
			if !seen[line] {
				seen[line] = true
				out = append(out, write{f, line, what})
			}
		}
		ast.Inspect(parsed[f], func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit, *ast.BinaryExpr:
				s, ok := literal(n.(ast.Expr), resolve)
				if !ok {
					return true
				}
				for _, m := range sqlWrite.FindAllStringSubmatch(s, -1) {
					copyTo := strings.HasPrefix(strings.ToUpper(strings.TrimSpace(m[0])), "COPY") && m[2] == ""
					if isTable[strings.ToLower(m[1])] && !copyTo {
						add(n.Pos(), strings.Join(strings.Fields(m[0]), " "))
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Identifier" && len(n.Elts) == 2 {
					schema, ok1 := literal(n.Elts[0], resolve)
					table, ok2 := literal(n.Elts[1], resolve)
					if ok1 && ok2 && schema == "shardid" && isTable[table] {
						add(n.Pos(), "Identifier{shardid, "+table+"}")
					}
				}
			}
			return true
		})
	}
	slices.SortFunc(out, func(a, b write) int {
		if c := strings.Compare(a.file, b.file); c != 0 {
			return c
		}
		return a.line - b.line
	})
	return out
}

// literal is e's string value when e is a string literal, or a
// concatenation with at least one: a part it cannot resolve (a call, a
// variable) reads as "?".
func literal(e ast.Expr, resolve func(ast.Expr) (string, bool)) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return literal(e.X, resolve)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, okx := literal(e.X, resolve)
		y, oky := literal(e.Y, resolve)
		if !okx && !oky {
			return "", false
		}
		if !okx {
			x = "?"
		}
		if !oky {
			y = "?"
		}
		return x + y, true
	}
	if resolve != nil {
		return resolve(e)
	}
	return "", false
}

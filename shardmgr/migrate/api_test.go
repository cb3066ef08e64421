package migrate_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// publicAPI are the packages whose exported names a user of the migration
// engine reads: this one whole, and the option and result structs of
// install and rebalance that carry a migration set, its options or its
// result (nil: every exported name of the package).
var publicAPI = []struct {
	dir   string
	names []string
}{
	{".", nil},
	{"../rebalance", []string{"MoveOptions", "PlanOptions"}},
	{"../install", []string{"InitOptions", "InitResult"}},
}

// TestAPIUsesNoInternalType: the exported names of the public packages
// never refer to a package under internal/, which a user cannot import:
// no alias of an internal type (go doc then shows neither its fields nor
// its methods), no field, parameter or result of an internal type, no
// constant or variable forwarded from one (issue 31, item 3). It reads
// the packages' source (go/parser), the test files left out.
func TestAPIUsesNoInternalType(t *testing.T) {
	for _, p := range publicAPI {
		fset := token.NewFileSet()
		files := parseDirSet(t, fset, p.dir)
		checked := 0
		for _, f := range files {
			imports := internalImports(f)
			for _, decl := range f.Decls {
				for _, node := range exportedParts(decl, p.names) {
					checked++
					ast.Inspect(node.expr, func(n ast.Node) bool {
						sel, ok := n.(*ast.SelectorExpr)
						if !ok {
							return true
						}
						if x, ok := sel.X.(*ast.Ident); ok && x.Obj == nil {
							if path, ok := imports[x.Name]; ok {
								t.Errorf("%s: %s refers to %s.%s, from %s, which users cannot import", fset.Position(sel.Pos()), node.name, x.Name, sel.Sel.Name, path)
							}
						}
						return true
					})
				}
			}
		}
		require.NotZero(t, checked, "%s: no exported declaration read", p.dir)
	}
}

// TestTablesAreTheShardSchemas: the table names go doc shows are those
// the shard-schema SQL (shardmgr/internal/base/shardschema) checks and creates.
func TestTablesAreTheShardSchemas(t *testing.T) {
	require.Equal(t, shardschema.VersionTable, migrate.VersionTable)
	require.Equal(t, shardschema.FailureTable, migrate.FailureTable)
}

// TestAPIDocumented: go doc shows every exported name of this package
// with its comment: every type, function, method, constant, variable and
// struct field has one (Options' fields, MigrationSet.Render), and so do
// the fields of install's and rebalance's structs that carry migrations.
func TestAPIDocumented(t *testing.T) {
	for _, p := range publicAPI {
		fset := token.NewFileSet()
		files := parseDirSet(t, fset, p.dir)
		pkg, err := doc.NewFromFiles(fset, files, "github.com/shardid/shardid/shardmgr/"+filepath.Base(p.dir))
		require.NoError(t, err)
		wanted := func(name string) bool { return p.names == nil || slices.Contains(p.names, name) }
		if p.names == nil {
			require.NotEmpty(t, strings.TrimSpace(pkg.Doc), "%s: no package comment", p.dir)
			for _, f := range pkg.Funcs {
				undocumented(t, p.dir, f.Name, f.Doc)
			}
			for _, v := range append(append([]*doc.Value{}, pkg.Consts...), pkg.Vars...) {
				valuesDocumented(t, p.dir, v)
			}
		}
		for _, typ := range pkg.Types {
			if !wanted(typ.Name) {
				continue
			}
			undocumented(t, p.dir, typ.Name, typ.Doc)
			spec := typ.Decl.Specs[0].(*ast.TypeSpec)
			if st, ok := spec.Type.(*ast.StructType); ok {
				fieldsDocumented(t, p.dir, typ.Name, st)
			}
			if p.names != nil {
				continue
			}
			for _, f := range append(append([]*doc.Func{}, typ.Funcs...), typ.Methods...) {
				undocumented(t, p.dir, typ.Name+"."+f.Name, f.Doc)
			}
			for _, v := range append(append([]*doc.Value{}, typ.Consts...), typ.Vars...) {
				valuesDocumented(t, p.dir, v)
			}
		}
		if p.names == nil {
			// What go doc ./shardmgr/migrate Options and MigrationSet.Render
			// print: the fields and the method, each with its comment.
			fields := map[string]bool{}
			methods := map[string]string{}
			for _, typ := range pkg.Types {
				if st, ok := typ.Decl.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType); ok && typ.Name == "Options" {
					for _, field := range st.Fields.List {
						for _, name := range field.Names {
							fields[name.Name] = true
						}
					}
				}
				for _, m := range typ.Methods {
					methods[typ.Name+"."+m.Name] = m.Doc
				}
			}
			for _, f := range []string{"Direction", "To", "Shards", "Workers", "FailFast", "LockTimeout", "LockWait"} {
				require.True(t, fields[f], "go doc %s Options: no field %s", p.dir, f)
			}
			require.NotEmpty(t, methods["MigrationSet.Render"], "go doc %s MigrationSet.Render: no such method, or undocumented", p.dir)
		}
	}
}

// fieldsDocumented: every exported field of st has a comment above it or
// on its line, or is named in the comment of the field above it ("From
// and To are ...", "Target is ..., TargetName its file").
func fieldsDocumented(t *testing.T, dir, typ string, st *ast.StructType) {
	t.Helper()
	above := ""
	for _, field := range st.Fields.List {
		if field.Doc != nil {
			above = field.Doc.Text()
		}
		for _, name := range field.Names {
			if !name.IsExported() || field.Doc != nil || field.Comment != nil {
				continue
			}
			if !regexp.MustCompile(`\b` + name.Name + `\b`).MatchString(above) {
				t.Errorf("%s: field %s.%s has no doc comment", dir, typ, name.Name)
			}
		}
	}
}

// exportedPart is the part of an exported declaration a user sees: a
// type's definition (its exported fields and methods), a function's
// signature, a constant's or variable's type and value.
type exportedPart struct {
	name string
	expr ast.Node
}

// exportedParts returns the parts of decl that are exported (and named in
// names, unless names is nil).
func exportedParts(decl ast.Decl, names []string) []exportedPart {
	wanted := func(id *ast.Ident) bool {
		return id.IsExported() && (names == nil || slices.Contains(names, id.Name))
	}
	var out []exportedPart
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		name := d.Name.Name
		if d.Recv != nil {
			recv := receiverName(d.Recv.List[0].Type)
			if !ast.IsExported(recv) || (names != nil && !slices.Contains(names, recv)) {
				return nil
			}
			name = recv + "." + name
		} else if names != nil {
			return nil
		}
		out = append(out, exportedPart{name, d.Type})
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if !wanted(s.Name) {
					continue
				}
				out = append(out, exportedPart{s.Name.Name, exportedType(s.Type)})
			case *ast.ValueSpec:
				if names != nil {
					continue
				}
				for i, id := range s.Names {
					if !id.IsExported() {
						continue
					}
					if s.Type != nil {
						out = append(out, exportedPart{id.Name, s.Type})
					}
					if i < len(s.Values) {
						out = append(out, exportedPart{id.Name, s.Values[i]})
					}
				}
			}
		}
	}
	return out
}

// exportedType is t with the unexported fields of a struct and the
// unexported methods of an interface left out.
func exportedType(t ast.Expr) ast.Node {
	var list *ast.FieldList
	switch x := t.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return t
	}
	kept := &ast.FieldList{}
	for _, f := range list.List {
		exported := len(f.Names) == 0 // an embedded type is promoted
		for _, n := range f.Names {
			exported = exported || n.IsExported()
		}
		if exported {
			kept.List = append(kept.List, f)
		}
	}
	return kept
}

func receiverName(t ast.Expr) string {
	switch x := t.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.IndexListExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// internalImports maps the names f gives its imports of internal packages
// to their paths.
func internalImports(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || !(strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal") || strings.HasPrefix(path, "internal/")) {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		out[name] = path
	}
	return out
}

func undocumented(t *testing.T, dir, name, text string) {
	t.Helper()
	if strings.TrimSpace(text) == "" {
		t.Errorf("%s: %s has no doc comment", dir, name)
	}
}

// valuesDocumented: a constant or variable is documented by its group's
// comment or by its own.
func valuesDocumented(t *testing.T, dir string, v *doc.Value) {
	t.Helper()
	if strings.TrimSpace(v.Doc) != "" {
		return
	}
	for _, spec := range v.Decl.Specs {
		s := spec.(*ast.ValueSpec)
		for _, n := range s.Names {
			if n.IsExported() && s.Doc == nil && s.Comment == nil {
				t.Errorf("%s: %s has no doc comment", dir, n.Name)
			}
		}
	}
}

// parseDirSet parses the package's own .go files in dir (not its tests).
func parseDirSet(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files, "no Go files in %s", dir)
	return files
}

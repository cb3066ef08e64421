package shardmgr_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// optionPackages are the packages whose options follow the convention
// doc.go states, relative to this directory.
var optionPackages = []string{".", "cluster", "rebalance", "install", "verify", "hosts", "migrate",
	"../migrations", "../idgen/segment", "../idgen/segment/httpapi", "../idgen/snowflake"}

// wordingsOut are the ways of saying a default that the convention
// replaced: one wording, "Without it, DefaultX (value)." for an option and
// "Zero means DefaultX (value)." for a field.
var wordingsOut = []struct {
	re   *regexp.Regexp
	want string
}{
	{regexp.MustCompile(`(?i)\bnil means\b`), `"Zero means" (nil is a field's zero)`},
	{regexp.MustCompile(`\bzero means\b`), `a sentence "Zero means ..."`},
	{regexp.MustCompile(`(?i)\bzero:`), `"Zero means ..."`},
	{regexp.MustCompile(`\b0 means\b`), `"Zero means ..."`},
	{regexp.MustCompile(`(?i)\bthe zero value is\b`), `"Zero means ..."`},
	{regexp.MustCompile(`(?i)\(default\b`), `"Without it, ..." or "Zero means ..."`},
	{regexp.MustCompile(`(?i)\bthe default is\b`), `"Without it, ..." or "Zero means ..."`},
	{regexp.MustCompile(`(?i)\bdefaults? to\b`), `"Without it, ..." or "Zero means ..."`},
	{regexp.MustCompile(`(^|[.;:]\s+)Default\s`), `"Without it, ..." or "Zero means ..."`},
	{regexp.MustCompile(`(Zero means|Without it,) \d`), `a named default: "DefaultX (value)"`},
	{regexp.MustCompile(`(Zero means|Without it,) Default[A-Z]\w*(\s*$|[^\w\s(]|\s+[^(\s])`), `the value after the name: "DefaultX (value)"`},
}

// TestOptionDocsSayDefaultsOneWay holds the options' documentation to
// the convention of doc.go: every option says what it does without it,
// and no option or options field words its default another way. Failed
// before: "Zero means 100ms", "Nil means DefaultKeep", "(default 3)",
// "The default is slog.Default()" side by side.
func TestOptionDocsSayDefaultsOneWay(t *testing.T) {
	var bad []string
	options, fields := 0, 0
	check := func(where, text string) {
		text = strings.Join(strings.Fields(text), " ")
		for _, w := range wordingsOut {
			if m := w.re.FindString(text); m != "" {
				bad = append(bad, where+": "+strings.TrimSpace(m)+" (want "+w.want+")")
			}
		}
	}
	for _, dir := range optionPackages {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
		require.NoError(t, err)
		require.Len(t, pkgs, 1, dir)
		for _, p := range pkgs {
			files := make([]*ast.File, 0, len(p.Files))
			for _, f := range p.Files {
				files = append(files, f)
			}
			d, err := doc.NewFromFiles(fset, files, "example.com/"+filepath.ToSlash(dir))
			require.NoError(t, err)
			for _, typ := range d.Types {
				for _, fn := range typ.Funcs {
					if !strings.HasSuffix(typ.Name, "Option") || !strings.HasPrefix(fn.Name, "With") {
						continue
					}
					options++
					where := d.Name + "." + fn.Name
					check(where, fn.Doc)
					if !strings.Contains(strings.Join(strings.Fields(fn.Doc), " "), "Without it,") {
						bad = append(bad, where+": says nothing of its default (want \"Without it, ...\")")
					}
				}
				if !strings.HasSuffix(typ.Name, "Options") && typ.Name != "TagConfig" && typ.Name != "Settings" {
					continue
				}
				ast.Inspect(typ.Decl, func(n ast.Node) bool {
					f, ok := n.(*ast.Field)
					if !ok || f.Doc == nil || len(f.Names) == 0 || !f.Names[0].IsExported() {
						return true
					}
					fields++
					check(d.Name+"."+typ.Name+"."+f.Names[0].Name, f.Doc.Text())
					return true
				})
			}
		}
	}
	require.Empty(t, bad, "options and options fields say their defaults as shardmgr's doc.go says")
	// The scan reads what it is about.
	require.Greater(t, options, 25)
	require.Greater(t, fields, 30)
}

package examples

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

type snippet struct {
	where string // file:line of the opening fence
	text  string // normalised
}

var (
	goFence  = regexp.MustCompile("^\\s*```go\\s*$")
	endFence = regexp.MustCompile("^\\s*```\\s*$")
)

// normalise drops each line's leading indentation and trailing spaces: a
// document shows a function's body without the function's indentation.
func normalise(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.TrimLeft(l, " \t"), " \t\r")
	}
	return strings.Join(lines, "\n")
}

// docSnippets returns the fenced ```go blocks of README.md and docs/*.md.
func docSnippets(t *testing.T) []snippet {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	var out []snippet
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		require.NoError(t, err)
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			if !goFence.MatchString(lines[i]) {
				continue
			}
			start := i
			for i++; i < len(lines) && !endFence.MatchString(lines[i]); i++ {
			}
			rel, _ := filepath.Rel(root, doc)
			where := rel + ":" + strconv.Itoa(start+1)
			require.Less(t, i, len(lines), "%s: ```go block never closed", where)
			out = append(out, snippet{where: where, text: normalise(strings.Join(lines[start+1:i], "\n"))})
		}
	}
	return out
}

// compiledSources returns the files a snippet may come from, normalised:
// every Example file (*example*_test.go) and every Go file under examples/.
func compiledSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		base := d.Name()
		example := strings.Contains(base, "example") && strings.HasSuffix(base, "_test.go")
		if example || strings.HasPrefix(rel, "examples"+string(filepath.Separator)) && strings.HasSuffix(base, ".go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] = "\n" + normalise(string(data)) + "\n"
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// source returns the file that holds text as whole lines, in order.
func source(sources map[string]string, text string) (string, bool) {
	for name, src := range sources {
		if strings.Contains(src, "\n"+text+"\n") {
			return name, true
		}
	}
	return "", false
}

// firstMissing is the snippet's first line no source holds after the
// lines before it: where a document and its source drifted apart.
func firstMissing(sources map[string]string, text string) string {
	lines := strings.Split(text, "\n")
	for n := 1; n <= len(lines); n++ {
		if _, ok := source(sources, strings.Join(lines[:n], "\n")); !ok {
			return lines[n-1]
		}
	}
	return ""
}

// Every Go snippet the documents show is the text of compiled code, so
// that none of them can stop compiling or drift from the API unseen.
func TestDocSnippetsAreCompiled(t *testing.T) {
	snippets := docSnippets(t)
	require.GreaterOrEqual(t, len(snippets), 9, "the documents' Go snippets were found")
	sources := compiledSources(t)
	require.Contains(t, sources, filepath.Join("examples", "router", "main.go"))
	require.Contains(t, sources, filepath.Join("shardmgr", "example_test.go"))
	for _, s := range snippets {
		require.NotEmpty(t, strings.TrimSpace(s.text), "%s: empty ```go block", s.where)
		if name, ok := source(sources, s.text); ok {
			t.Logf("%s is in %s", s.where, name)
			continue
		}
		t.Errorf("%s: this Go snippet is not the text of any Example (*example*_test.go) or file under examples/; "+
			"make it one (modulo leading indentation). First line not found in order: %q",
			s.where, firstMissing(sources, s.text))
	}
}

// The check itself catches a snippet that drifted by one character, or
// whose lines are out of order.
func TestDocSnippetCheckCatchesDrift(t *testing.T) {
	sources := map[string]string{"a.go": "\n" + normalise("func f() {\n\tx := 1\n\ty := 2\n\t_ = x + y\n}") + "\n"}
	_, ok := source(sources, normalise("x := 1\n    y := 2"))
	require.True(t, ok, "indentation does not matter")
	_, ok = source(sources, normalise("x := 1\ny := 3"))
	require.False(t, ok)
	require.Equal(t, "y := 3", firstMissing(sources, normalise("x := 1\ny := 3")))
	_, ok = source(sources, normalise("y := 2\nx := 1"))
	require.False(t, ok)
	_, ok = source(sources, normalise(":= 1\ny := 2"))
	require.False(t, ok, "whole lines only")
}

package internal

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/compatibility.md's table of environments by command says, per
// cell, which test measures it, or that it is not supported (and why),
// or that it is not measured yet. Every test it names exists in this
// repository, every row has a cell per command, and the rows the table
// promises (self-hosted, managed, the poolers, TLS, each major 14 to 18)
// are there.
func TestCompatibilityTableNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "compatibility.md"))
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "## Environments")
	require.GreaterOrEqual(t, start, 0, "docs/compatibility.md has no Environments section")
	section := text[start:]
	if end := strings.Index(section[2:], "\n## "); end >= 0 {
		section = section[:end+2]
	}

	defined := map[string]bool{}
	funcTest := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	require.NoError(t, filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != ".." {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range funcTest.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	}))

	named := regexp.MustCompile("`(Test\\w+)`")
	var header []string
	rows := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if header == nil {
			header = cells
			require.Equal(t, []string{"environment", "init", "migrate", "verify", "move online/offline",
				"host failover", "serve", "console", "router"}, header)
			continue
		}
		env := cells[0]
		rows[env] = true
		require.Len(t, cells, len(header), "row %q", env)
		for i, cell := range cells[1:] {
			tests := named.FindAllStringSubmatch(cell, -1)
			for _, m := range tests {
				require.True(t, defined[m[1]], "row %q, %s: %s is not a test of this repository", env, header[i+1], m[1])
			}
			marked := strings.Contains(cell, "not supported") || strings.Contains(cell, "not measured") ||
				strings.Contains(cell, "as self-hosted")
			require.True(t, len(tests) > 0 || marked,
				"row %q, %s: %q names no test and is not marked not supported or not measured", env, header[i+1], cell)
		}
	}
	want := []string{"self-hosted", "managed", "transaction pooling", "session pooling", "verify-full",
		"PostgreSQL 14", "PostgreSQL 15", "PostgreSQL 16", "PostgreSQL 17", "PostgreSQL 18"}
	for _, w := range want {
		found := false
		for env := range rows {
			found = found || strings.Contains(env, w)
		}
		require.True(t, found, "no row for %s", w)
	}
}

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layoutHeading is the README section whose table maps the repository.
const layoutHeading = "## Layout of the repository"

// readmeLayoutFolders returns the folders README's layout table names: every
// `code` span of its rows, as a path without its trailing slash.
func readmeLayoutFolders(t *testing.T, readme string) map[string]bool {
	t.Helper()
	start := strings.Index(readme, "\n"+layoutHeading+"\n")
	require.GreaterOrEqual(t, start, 0, "README has no %q section", layoutHeading)
	span := regexp.MustCompile("`([^`]+)`")
	named := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(readme[start+len(layoutHeading)+2:], "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			named[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	require.NotEmpty(t, named, "README's layout table names no folder")
	return named
}

// goFolders returns every folder of the repository that holds Go code,
// relative to root; testdata and hidden folders are not code.
func goFolders(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	require.NoError(t, err)
	var out []string
	for dir := range seen {
		out = append(out, dir)
	}
	sort.Strings(out)
	return out
}

// README's layout table names every folder with Go code, so that the next
// maintainer finds each package there (issue 31, §5: it lacked
// idgen/snowflake, idgen/segment/httpapi and five internal packages).
func TestREADMELayoutNamesEveryGoFolder(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	named := readmeLayoutFolders(t, string(readme))
	folders := goFolders(t, root)
	require.Contains(t, folders, "shardmgr", "the walk finds the packages")
	for _, dir := range folders {
		assert.True(t, named[dir], "README's layout table (%s) does not name `%s/`, a folder with Go code: add a row for it", layoutHeading, dir)
	}
	// And it names no folder that is gone.
	repoPath := regexp.MustCompile(`^[a-z][a-z0-9_/-]*$`)
	for path := range named {
		if repoPath.MatchString(path) && isRepoFolderPath(path) {
			_, err := os.Stat(filepath.Join(root, path))
			assert.NoError(t, err, "README's layout table names `%s/`, which does not exist", path)
		}
	}
}

// isRepoFolderPath tells a span that names a folder of the repository (a
// path under one of its top-level folders) from other code in the table.
func isRepoFolderPath(path string) bool {
	top, _, _ := strings.Cut(path, "/")
	switch top {
	case "cmd", "examples", "idgen", "internal", "migrations", "shardmgr", "sql", "testdata", "docs", "ext":
		return true
	}
	return false
}

package internal

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// THIRD_PARTY.md's table names each file copied from another project, and
// the license that file keeps. Every file it names exists in this
// repository, and every source file that carries another's copyright
// notice is named there: a move or a rename of the copied file cannot
// leave the table pointing at nothing. Failed before: the table named
// shardmgr/migrate_split.go, gone since the splitter moved to its own
// package.
func TestThirdPartyNamesRealFiles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "THIRD_PARTY.md"))
	require.NoError(t, err)
	named := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		file := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if file == "file" || strings.Trim(file, "-: ") == "" {
			continue // the header and its rule
		}
		named[file] = true
		st, err := os.Stat(filepath.Join("..", filepath.FromSlash(file)))
		require.NoError(t, err, "THIRD_PARTY.md names %s, which is not in the repository", file)
		require.True(t, st.Mode().IsRegular(), "THIRD_PARTY.md names %s, which is not a file", file)
	}
	require.NotEmpty(t, named, "THIRD_PARTY.md has no table of copied files")

	// The other way: a file with a copyright notice (ours is LICENSE
	// alone) is one the table names.
	require.NoError(t, filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
				return fs.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".c", ".h", ".sql", ".js", ".css", ".sh":
		default:
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "Copyright (c)") {
			rel := filepath.ToSlash(strings.TrimPrefix(p, ".."+string(filepath.Separator)))
			require.True(t, named[rel], "%s carries a copyright notice but THIRD_PARTY.md does not name it", rel)
		}
		return nil
	}))
}

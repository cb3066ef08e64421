package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
)

// readRepoFile is a file of the repository, from its root.
func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", name))
	require.NoError(t, err)
	return string(data)
}

// docNumber is the number that re's one group captures in doc name, the
// one place the doc says it.
func docNumber(t *testing.T, name string, re *regexp.Regexp) string {
	t.Helper()
	m := re.FindAllStringSubmatch(readRepoFile(t, name), -1)
	require.Len(t, m, 1, "%s: %s once", name, re)
	return m[0][1]
}

// Issue 30 §5: the docs say what the commands print and the catalog
// holds. verify's count of checks, with and without --deep, as README
// (the demo's verify reads every stored id: --deep), docs/rebalance.md and
// docs/shardmgr.md quote it; the catalog's columns as docs/shardmgr.md's
// table names them (`schema_name`, not `schema`); the example router's
// migrations where the README puts them.
func TestDocsSayWhatCommandsPrintAndCatalogHolds(t *testing.T) {
	path := clusterPath(t, 4)
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	checks := map[bool]string{}
	for _, deep := range []bool{false, true} {
		args := []string{"verify", "--config", path}
		if deep {
			args = append(args, "--deep")
		}
		out, code := runClusterCmd(t, args...)
		require.Equal(t, 0, code, out)
		m := regexp.MustCompile(`verify: ok: .*, (\d+) checks,`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		checks[deep] = m[1]
	}
	require.Equal(t, checks[true], docNumber(t, "README.md", regexp.MustCompile(`verify: ok: (\d+) checks on .* every stored id read`)), "README.md: the demo's verify --deep")
	require.Equal(t, checks[false], docNumber(t, "docs/rebalance.md", regexp.MustCompile(`verify: ok: \d+ shards on \d+ hosts, (\d+) checks`)), "docs/rebalance.md: shardid verify")
	require.Equal(t, checks[false], docNumber(t, "docs/shardmgr.md", regexp.MustCompile("`verify` on that cluster \\((\\d+) checks")), "docs/shardmgr.md: verify's timing")

	// Every name in backquotes in the catalog table of docs/shardmgr.md
	// is a column of that table (or view) in the catalog.
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	cat := pgtest.Pool(t, cfg.Catalog)
	doc := readRepoFile(t, "docs/shardmgr.md")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)`(?: \\(a view\\))? \\| (.*) \\|$")
	name := regexp.MustCompile("`([a-z_]+)`")
	tables := 0
	for _, m := range row.FindAllStringSubmatch(doc[strings.Index(doc, "\n## Catalog\n"):], -1) {
		var cols []string
		require.NoError(t, cat.QueryRow(context.Background(), `SELECT coalesce(array_agg(column_name::text), '{}') FROM information_schema.columns
			WHERE table_schema = 'shardid' AND table_name = $1`, m[1]).Scan(&cols))
		if len(cols) == 0 {
			break // past the catalog's table
		}
		tables++
		named := name.FindAllStringSubmatch(m[2], -1)
		require.NotEmpty(t, named, "docs/shardmgr.md names shardid.%s's columns", m[1])
		for _, n := range named {
			require.Contains(t, cols, n[1], "docs/shardmgr.md: shardid.%s has no column %q", m[1], n[1])
		}
	}
	require.GreaterOrEqual(t, tables, 6, "cluster, hosts, shards, changes, catalog_readers, routes")

	// The example router's migrations are the README's.
	readme := readRepoFile(t, "README.md")
	require.Contains(t, readme, "cp -r examples/shard-migrations .")
	main := readRepoFile(t, "examples/router/main.go")
	m := regexp.MustCompile(`\(([a-z/_-]+/001_create_likes\.sql)`).FindStringSubmatch(main)
	require.NotNil(t, m, "examples/router/main.go names its migration")
	require.Equal(t, "examples/shard-migrations/001_create_likes.sql", m[1])
	_, err = os.Stat(filepath.Join("..", "..", m[1]))
	require.NoError(t, err)
}

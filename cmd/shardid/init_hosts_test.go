package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// shardid init with one database named twice (127.0.0.1 and localhost):
// one line naming both hosts, exit 1, and the fixed file initialises.
func TestInitOneDatabaseTwoNamesCLI(t *testing.T) {
	s := pgtest.Servers(t, 1)[0]
	catalog := pgtest.NewDB(t, s)
	app := pgtest.NewDB(t, s)
	other := strings.Replace(app, "@127.0.0.1:", "@localhost:", 1)
	require.NotEqual(t, app, other)
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	write := func(hosts ...string) {
		var b strings.Builder
		fmt.Fprintf(&b, "cluster: twonames\nshards: 4\ncatalog: %s\nhosts:\n", catalog)
		for i, h := range hosts {
			fmt.Fprintf(&b, "  - name: pg%d\n    dsn: %s\n", i+1, h)
		}
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	}
	write(app, other)
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "hosts pg1 (")
	require.Contains(t, out, "are one database")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, out)

	out, code = runClusterCmd(t, "status", "--config", path)
	require.Equal(t, 1, code, "nothing was recorded: %s", out)
	require.Contains(t, out, "not initialised")

	write(app)
	out, code = runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Equal(t, 0, code, out)
}

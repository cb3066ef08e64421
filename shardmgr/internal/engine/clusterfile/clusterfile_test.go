package clusterfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

const file = `# the operator's notes
cluster: demo   # the name
shards: 4
catalog: postgres://postgres@127.0.0.1:5432/cat
hosts:
  - name: pg1   # the first
    dsn: postgres://postgres@127.0.0.1:5432/app1
  - name: pg2
    dsn: postgres://postgres@127.0.0.1:5432/app2
    drain: yes
segments:
  sources: [postgres://127.0.0.1/seg]
`

func noEnv(string) (string, bool) { return "", false }

// TestEditKeepsTheRest: an edit changes the one host's key, keeps the
// comments, the other sections and the file's mode, and leaves no
// temporary file; Undo puts the file back.
func TestEditKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(file), 0o640))

	e, err := SetHost(path, "pg1", "dsn", "host=10.0.0.7 dbname=app1", noEnv)
	require.NoError(t, err)
	require.True(t, e.Changes())
	require.NoError(t, e.Write())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, keep := range []string{"# the operator's notes", "# the name", "# the first", "segments:", "drain: yes"} {
		require.Contains(t, string(data), keep)
	}
	cfg, err := shardmgr.ParseConfig(data, path, noEnv)
	require.NoError(t, err)
	h, _ := cfg.Host("pg1")
	require.Equal(t, "host=10.0.0.7 dbname=app1", h.DSN)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")
	require.NoError(t, e.Undo())
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, file, string(data))

	// drain: yes already reads true: nothing to change; false removes it.
	e, err = SetHost(path, "pg2", "drain", "true", noEnv)
	require.NoError(t, err)
	require.False(t, e.Changes())
	e, err = SetHost(path, "pg2", "drain", "false", noEnv)
	require.NoError(t, err)
	require.NoError(t, e.Write())
	cfg, err = shardmgr.LoadConfig(path)
	require.NoError(t, err)
	h, _ = cfg.Host("pg2")
	require.False(t, h.Drain)

	// An edit that would leave an invalid file is refused before writing.
	_, err = SetHost(path, "pg2", "dsn", "postgres://postgres@127.0.0.1:5432/app1", noEnv)
	require.ErrorIs(t, err, shardmgr.ErrConfig)
	_, err = SetHost(path, "pg9", "dsn", "x", noEnv)
	require.ErrorIs(t, err, shardmgr.ErrUnknownHost)
	e, err = RemoveHost(path, "pg2", noEnv)
	require.NoError(t, err)
	require.NoError(t, e.Write())
	_, err = RemoveHost(path, "pg1", noEnv)
	require.ErrorIs(t, err, shardmgr.ErrConfig, "the last host")
}

package migrate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// Migration files are read with a limit too, by shardid and by tern's
// loader alike.
func TestMigrationSetRefusesHugeFiles(t *testing.T) {
	huge := "SELECT 1;\n-- " + strings.Repeat("x", migrate.MaxMigrationFileSize) + "\n"
	_, err := migrate.LoadMigrationSet(fstest.MapFS{"001_big.sql": {Data: []byte(huge)}})
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorIs(t, err, shardmgr.ErrFileTooLarge)
	require.Less(t, len(err.Error()), 300)

	// A migration that is a link to /dev/zero.
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "001_zero.sql")))
	_, err = migrate.LoadMigrationDir(dir)
	require.ErrorIs(t, err, shardmgr.ErrFileTooLarge)
}

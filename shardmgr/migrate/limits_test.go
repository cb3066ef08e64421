package migrate_test

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

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

	// A migration that is a device without end, as /dev/zero is.
	_, err = migrate.LoadMigrationSet(zeroFS{})
	require.ErrorIs(t, err, shardmgr.ErrFileTooLarge)

	// A migration that is a link to /dev/zero: outside the directory,
	// refused before it is read.
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "001_zero.sql")))
	_, err = migrate.LoadMigrationDir(dir)
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, "outside the migrations directory")
}

// zeroFS holds one migration, 001_zero.sql, a character device that reads
// zeros without end.
type zeroFS struct{}

func (zeroFS) Open(name string) (fs.File, error) {
	switch name {
	case ".":
		return &zeroDir{}, nil
	case "001_zero.sql":
		return zeroFile{}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

type zeroFile struct{}

func (zeroFile) Stat() (fs.FileInfo, error) { return zeroInfo{}, nil }
func (zeroFile) Close() error               { return nil }
func (zeroFile) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type zeroInfo struct{}

func (zeroInfo) Name() string       { return "001_zero.sql" }
func (zeroInfo) Size() int64        { return 0 }
func (zeroInfo) Mode() fs.FileMode  { return fs.ModeDevice | fs.ModeCharDevice | 0o666 }
func (zeroInfo) ModTime() time.Time { return time.Time{} }
func (zeroInfo) IsDir() bool        { return false }
func (zeroInfo) Sys() any           { return nil }

type zeroDir struct{ read bool }

func (*zeroDir) Stat() (fs.FileInfo, error) { return fstest.MapFS{"x": {}}.Stat(".") }
func (*zeroDir) Read([]byte) (int, error)   { return 0, io.EOF }
func (*zeroDir) Close() error               { return nil }
func (d *zeroDir) ReadDir(int) ([]fs.DirEntry, error) {
	if d.read {
		return nil, nil
	}
	d.read = true
	return []fs.DirEntry{fs.FileInfoToDirEntry(zeroInfo{})}, nil
}

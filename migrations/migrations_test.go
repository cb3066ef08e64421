package migrations

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLatest(t *testing.T) {
	v, err := Catalog.Latest()
	require.NoError(t, err)
	require.EqualValues(t, 19, v, "a new catalog migration must update this test and the CHANGELOG")
	v, err = Segment.Latest()
	require.NoError(t, err)
	require.EqualValues(t, 1, v)

	empty := Set{Name: "empty", FS: fstest.MapFS{}}
	v, err = empty.Latest()
	require.NoError(t, err)
	require.Zero(t, v)

	bad := Set{Name: "bad", FS: fstest.MapFS{"x_a.up.sql": {}}}
	_, err = bad.Latest()
	require.ErrorContains(t, err, "x_a.up.sql")
}

func TestSetWith(t *testing.T) {
	base := Set{Name: "t", FS: fstest.MapFS{
		"001_a.up.sql": {Data: []byte("a")}, "001_a.down.sql": {Data: []byte("-a")},
		"002_b.up.sql": {Data: []byte("b")},
	}}
	set, err := base.With(fstest.MapFS{
		"002_broken.up.sql": {Data: []byte("SELECT 1/0")},
		"003_c.up.sql":      {Data: []byte("c")},
	})
	require.NoError(t, err)
	v, err := set.Latest()
	require.NoError(t, err)
	require.EqualValues(t, 3, v)
	entries, err := fs.ReadDir(set.FS, ".")
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"001_a.down.sql", "001_a.up.sql", "002_broken.up.sql", "003_c.up.sql"}, names)
	v, err = base.Latest()
	require.NoError(t, err)
	require.EqualValues(t, 2, v, "With leaves the set it extends alone")
}

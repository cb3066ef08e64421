package migrations

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLatest(t *testing.T) {
	v, err := Catalog.Latest()
	require.NoError(t, err)
	require.EqualValues(t, 12, v, "a new catalog migration must update this test and the CHANGELOG")
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

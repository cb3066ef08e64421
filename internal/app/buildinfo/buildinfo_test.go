package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRead(t *testing.T) {
	i := Read()
	require.NotEmpty(t, i.Version)
	require.Equal(t, runtime.Version(), i.Go)
	require.NotZero(t, i.CatalogSchema)
	require.NotZero(t, i.Generator)
	require.True(t, strings.HasPrefix(i.String(), "shardid "+i.Version))
}

func TestStampedWins(t *testing.T) {
	old := stamped
	t.Cleanup(func() { stamped = old })
	stamped = "v9.8.7"
	require.Equal(t, "v9.8.7", Read().Version)
}

func TestString(t *testing.T) {
	i := Info{Version: "(devel)", Revision: "0123456789abcdef", Time: "2026-11-30T08:00:00Z", Modified: true, Go: "go1.26.8"}
	require.Equal(t, "shardid (devel) (0123456789ab, modified, 2026-11-30T08:00:00Z), go1.26.8", i.String())
	require.Equal(t, "shardid v1.0.0, go1.26.8", Info{Version: "v1.0.0", Go: "go1.26.8"}.String())
}

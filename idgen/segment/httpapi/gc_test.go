package httpapi_test

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment/httpapi"
)

func TestLimitGC(t *testing.T) {
	t.Cleanup(func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) })
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "200")
	require.False(t, httpapi.LimitGC(64<<20), "GOGC in the environment wins")
	require.EqualValues(t, math.MaxInt64, debug.SetMemoryLimit(-1))
	t.Setenv("GOGC", "")
	require.False(t, httpapi.LimitGC(0), "0 keeps Go's policy")
	require.EqualValues(t, math.MaxInt64, debug.SetMemoryLimit(-1))
	require.True(t, httpapi.LimitGC(64<<20))
	require.EqualValues(t, 64<<20, debug.SetMemoryLimit(-1))
	require.Equal(t, -1, debug.SetGCPercent(-1))
}

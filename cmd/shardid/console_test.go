package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// console refuses a non-loopback --listen before it reads anything, and
// says which flag serves it anyway.
func TestConsoleRefusesRemoteListen(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8090", ":8090", "10.1.2.3:8090"} {
		out, err := runShardid(t, "console", "--config", "no-such-file.yaml", "--listen", addr)
		require.Equal(t, 2, exitCode(err), "%s: %s", addr, out)
		require.ErrorContains(t, err, "not loopback")
		require.ErrorContains(t, err, "--allow-remote")
	}
}

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// --catchup-timeout must be positive: a usage error (exit 2) before the
// cluster file is read.
func TestCatchupTimeoutFlag(t *testing.T) {
	for _, args := range [][]string{
		{"rebalance", "apply", "--catchup-timeout", "0s"},
		{"shard", "move", "3", "--to", "pg4", "--catchup-timeout", "-1m"},
	} {
		_, err := runShardid(t, args...)
		require.ErrorContains(t, err, "--catchup-timeout must be positive", args)
		require.Equal(t, 2, exitCode(err), args)
	}
}

package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/verify"
)

// verify's last line counts its problems in English: 1 problem, 2 problems.
func TestPrintVerifyCountsProblems(t *testing.T) {
	for n, want := range map[int]string{1: "verify: 1 problem: ", 2: "verify: 2 problems: "} {
		var b strings.Builder
		printVerify(&b, &verify.Report{Problems: slices.Repeat([]verify.Problem{verify.Problem{Check: "generator", Shard: 3, Host: "pg1", Detail: "missing"}}, n), Shards: 4, Hosts: 2})
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		require.True(t, strings.HasPrefix(lines[len(lines)-1], want), "%d: %q", n, lines[len(lines)-1])
	}
}

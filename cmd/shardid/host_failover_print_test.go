package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/hosts"
)

// Issue 30 §4: failover printed "the new server's clock is -35ms behind":
// a clock ahead is said as ahead, with the absolute value.
func TestPrintFailoverClockAheadOrBehind(t *testing.T) {
	for behind, want := range map[int64]string{
		-35:  "the new server's clock is 35ms ahead of this machine's",
		35:   "the new server's clock is 35ms behind this machine's",
		1500: "the new server's clock is 1.5s behind this machine's",
		0:    "the new server's clock agrees with this machine's to the millisecond",
	} {
		var b strings.Builder
		printFailover(&b, &hosts.FailoverResult{Host: "pg2", Bound: time.Unix(0, 0).UTC(), MarginMS: 1000, ServerBehindMS: behind})
		require.Contains(t, b.String(), want)
		require.NotRegexp(t, `clock is -\d`, b.String())
	}
}

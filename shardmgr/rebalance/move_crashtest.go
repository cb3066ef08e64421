//go:build shardid_crashtest

package rebalance

import (
	"fmt"
	"os"
)

// In a binary built with -tags shardid_crashtest (by tests only), the
// mover stops for good at the cut-over's point named by
// SHARDID_CRASHTEST_HANG_AT (crashFlipCommitted, crashTargetOpened), after
// saying so on stderr, for the test to kill it there with kill -9.
func init() {
	hangAt = func(point string) {
		if os.Getenv("SHARDID_CRASHTEST_HANG_AT") != point {
			return
		}
		fmt.Fprintf(os.Stderr, "shardid crashtest: hanging at %s\n", point)
		select {}
	}
}

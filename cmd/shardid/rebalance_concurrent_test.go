package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// Two shardid rebalance apply at once both exit 0: one runs the moves,
// the other waits for it and says it found nothing left to do.
func TestRebalanceApplyTwiceAtOnce(t *testing.T) {
	path, _ := clusterFile(t, 6)
	dir := initAndFill(t, path, 6, 10)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "  - name: pg4\n    dsn: %s\n", pgtest.NewDB(t, pgtest.Servers(t, 4)[3]))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)

	var wg sync.WaitGroup
	outs := make([]string, 2)
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			outs[i], codes[i] = runClusterCmd(t, "rebalance", "apply", "--config", path, "--dir", dir)
		})
	}
	wg.Wait()
	require.Equal(t, []int{0, 0}, codes, "%s\n----\n%s", outs[0], outs[1])
	var moved, waited int
	for _, o := range outs {
		if strings.Contains(o, "moves (0 resumed)") {
			moved++
		}
		if strings.Contains(o, "for another rebalance apply; it left nothing to do") {
			waited++
		}
	}
	require.Equal(t, 1, moved, "%s\n----\n%s", outs[0], outs[1])
	require.Equal(t, 1, waited, "%s\n----\n%s", outs[0], outs[1])
	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Equal(t, 0, code, out)
}

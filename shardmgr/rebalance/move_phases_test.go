package rebalance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPointOfNoReturnInEveryPhaseTable: each mode's phase table passes the
// point of no return once, after the source was fenced and the copy
// verified, and every phase from it on (and only those) is past it: what
// abort, resume, cleanup and verify ask (Phase.PastNoReturn).
func TestPointOfNoReturnInEveryPhaseTable(t *testing.T) {
	for mode, table := range phases {
		at := -1
		for i, s := range table {
			if s.phase == PointOfNoReturn {
				require.Equal(t, -1, at, "%s: the point of no return twice", mode)
				at = i
			}
			require.Equal(t, at >= 0, s.phase.PastNoReturn(), "%s: %s", mode, s.phase)
			if at >= 0 {
				require.False(t, s.fencedAfter, "%s: %s: nothing after the flip fences the source's successor", mode, s.phase)
			}
		}
		require.Positive(t, at, "%s: no point of no return", mode)
		require.Equal(t, PhaseVerified, table[at-1].phase, "%s: the flip comes right after the copy is verified", mode)
		require.Equal(t, PhaseCleaned, table[len(table)-1].phase)
	}
	require.False(t, PhaseAborted.PastNoReturn())
	require.False(t, PhaseAborted.Open())
}

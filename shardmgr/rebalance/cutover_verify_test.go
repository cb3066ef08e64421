package rebalance

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

// verify names the unfinished move a copy belongs to, with how to resume
// or undo it, rather than calling it a stray copy.
func TestVerifyNamesUnfinishedMove(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 4)
	opts := ApplyOptions{Move: MoveOptions{Migrations: sampleSet(t)}}
	opts.Move.stopAfter = PhaseCopy
	res, err := Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), opts)
	require.ErrorIs(t, err, errStopped)
	require.Len(t, res.Moves, 1)
	mv := res.Moves[0]

	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	var placement []string
	for _, p := range rep.Problems {
		if p.Check == verify.CheckPlacement {
			placement = append(placement, p.String())
			require.Equal(t, verify.FixResumeOrAbortMove, p.Fix, "the CLI says: resume with apply, undo with abort")
		}
	}
	require.Equal(t, []string{fmt.Sprintf("placement shard %d on %s: copy on %s belongs to unfinished move %d",
		mv.Shard, mv.To, mv.To, mv.ID)}, placement, "%v", rep.Problems)

	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{mv.Shard})
	require.NoError(t, err)
	requireVerifyOK(t, cfg)
}

package rebalance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A dry run of a move runs its checks and preflight, lists the phases
// with the fenced ones and the point of no return marked, and changes
// nothing: no journal entry, no new generation, no schema on the target.
// Resuming, it marks the phases the move has passed.
func TestDryRunMoveChangesNothing(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	ctx := clustertest.Ctx(t)
	c := clustertest.Handle(t, cfg)
	before := clustertest.ClusterMap(t, cfg)
	opts := MoveOptions{Migrations: sampleSet(t)}

	d, err := DryRunMove(ctx, c, 2, "pg4", opts)
	require.NoError(t, err)
	require.Equal(t, before.Shards[2].Host, d.From)
	require.Equal(t, MoveOnline, d.Mode)
	require.Zero(t, d.Resumes)
	require.NotEmpty(t, d.Preflight)
	for _, ch := range d.Preflight {
		require.True(t, ch.OK, "%+v", ch)
	}
	var names []Phase
	var noReturn []Phase
	for _, p := range d.Phases {
		names = append(names, p.Phase)
		require.False(t, p.Done)
		if p.PointOfNoReturn {
			noReturn = append(noReturn, p.Phase)
		}
		require.Equal(t, p.Phase == PhaseFenced || p.Phase == PhaseVerified, p.Fenced, p.Phase)
	}
	require.Equal(t, steps(MoveOnline), names)
	require.Equal(t, []Phase{PointOfNoReturn}, noReturn)

	moves, err := Moves(ctx, c, true)
	require.NoError(t, err)
	require.Empty(t, moves, "nothing journaled")
	after := clustertest.ClusterMap(t, cfg)
	require.Equal(t, before.Generation, after.Generation)
	var n int
	require.NoError(t, clustertest.HostPool(t, cfg, "pg4").QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, before.Shards[2].Schema).Scan(&n))
	require.Zero(t, n, "no schema on the target")

	// Offline: the fence comes before the copy.
	off := opts
	off.Mode = MoveOffline
	d, err = DryRunMove(ctx, c, 2, "pg4", off)
	require.NoError(t, err)
	require.Equal(t, MoveOffline, d.Mode)
	require.Equal(t, PhaseFenced, d.Phases[2].Phase)
	require.True(t, d.Phases[3].Fenced, "offline copy under the fence")

	// A move stopped after its copy: the dry run resumes it.
	stopped := opts
	stopped.stopAfter = PhaseCopy
	_, err = MoveShard(ctx, c, 2, "pg4", stopped)
	require.ErrorIs(t, err, errStopped)
	d, err = DryRunMove(ctx, c, 2, "pg4", opts)
	require.NoError(t, err)
	require.NotZero(t, d.Resumes)
	for _, p := range d.Phases {
		require.Equal(t, p.Phase == PhasePlanned || p.Phase == PhaseSchema || p.Phase == PhaseCopy, p.Done, p.Phase)
	}
	// And the move itself still finishes.
	res, err := MoveShard(ctx, c, 2, "pg4", opts)
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
}

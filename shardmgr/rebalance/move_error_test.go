package rebalance

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A move that failed and was then resumed to the end shows the current
// state only: no error in the journal (rebalance status), in the record
// or in the apply's result.
func TestResumedMoveClearsItsError(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 4)
	opts := ApplyOptions{Move: MoveOptions{Migrations: sampleSet(t)}}
	opts.Move.flipCatalog = func() error { return errors.New("catalog lost") }
	res, err := Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), opts)
	require.ErrorContains(t, err, "catalog lost")
	require.Len(t, res.Moves, 1)
	require.ErrorContains(t, res.Moves[0].Err, "catalog lost")
	open, err := Moves(clustertest.Ctx(t), clustertest.Handle(t, cfg), false)
	require.NoError(t, err)
	require.Len(t, open, 1)
	require.Contains(t, open[0].Error, "catalog lost")

	opts.Move.flipCatalog = nil
	res, err = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), opts)
	require.NoError(t, err)
	require.Equal(t, 1, res.Resumed)
	require.Len(t, res.Moves, 1)
	require.Equal(t, PhaseCleaned, res.Moves[0].Phase)
	require.NoError(t, res.Moves[0].Err)
	all, err := Moves(clustertest.Ctx(t), clustertest.Handle(t, cfg), true)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, PhaseCleaned, all[0].Phase)
	require.Empty(t, all[0].Error, "the journal keeps the current state only")
}

package rebalance

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// Two rebalance applies at once: the second waits for the first, finds
// nothing left to do and succeeds; neither reports the other as a
// failure.
func TestTwoAppliesAtOnce(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	fillShards(t, cfg, 6)
	started := make(chan struct{})
	var once sync.Once
	first := ApplyOptions{Move: MoveOptions{Migrations: sampleSet(t), Progress: func(MoveProgress) { once.Do(func() { close(started) }) }}}
	var (
		resA *ApplyResult
		errA error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		resA, errA = Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), first)
	}()
	<-started
	resB, errB := Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Move: MoveOptions{Migrations: sampleSet(t)}})
	<-done
	require.NoError(t, errA)
	require.NoError(t, errB)
	require.NotEmpty(t, resA.Moves)
	for _, mv := range resA.Moves {
		require.Equal(t, PhaseCleaned, mv.Phase)
	}
	require.Empty(t, resB.Moves, "the first apply left nothing to do")
	require.Positive(t, resB.Waited)
	require.Equal(t, 0, resB.Resumed)
	counts := hostCounts(clustertest.ClusterMap(t, cfg))
	require.Len(t, counts, 4)
	requireVerifyOK(t, cfg)
}

// An apply that finds a move another manager is running (shardid shard
// move) waits for it; finding it finished, it has nothing to do for it
// and succeeds, naming the move.
func TestApplyWaitsForAMoveRunByAnotherManager(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	fillShards(t, cfg, 6)
	started := make(chan struct{})
	var once sync.Once
	// The move holds at its first step until apply says it waits for it:
	// however slow the machine, apply finds the move running.
	waiting := make(chan struct{})
	var waitingOnce sync.Once
	applyLog := slog.New(slog.NewTextHandler(lineWatch(func(line string) {
		if strings.Contains(line, "another manager is working on the move") {
			waitingOnce.Do(func() { close(waiting) })
		}
	}), nil))
	var (
		moved   *MoveResult
		moveErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		moved, moveErr = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg4", MoveOptions{Migrations: sampleSet(t),
			Progress: func(MoveProgress) {
				once.Do(func() {
					close(started)
					select {
					case <-waiting:
					case <-time.After(5 * time.Minute): // apply failed; its error says why
					}
				})
			}})
	}()
	<-started
	res, err := Apply(clustertest.Ctx(t), clustertest.Handle(t, cfg), ApplyOptions{Move: MoveOptions{Migrations: sampleSet(t), Logger: applyLog}})
	<-done
	require.NoError(t, moveErr)
	require.NoError(t, err)
	require.Equal(t, []int64{moved.ID}, res.FinishedByOthers)
	require.Equal(t, 1, res.Resumed)
	require.Equal(t, PhaseCleaned, res.Moves[0].Phase)
	require.NoError(t, res.Moves[0].Err)
	require.Positive(t, res.Waited)
	require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[0].Host)
	requireVerifyOK(t, cfg)
}

// fillShards gives every shard some rows: a move fences the source's
// counter by drawing one value, which fails on a counter never used.
func fillShards(t *testing.T, cfg *shardmgr.Config, shards int) {
	t.Helper()
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	for s := range shards {
		routeLikes(t, r, s, 10)
	}
}

// lineWatch is an io.Writer that hands each line written to it to fn.
type lineWatch func(line string)

func (w lineWatch) Write(p []byte) (int, error) {
	w(string(p))
	return len(p), nil
}

package rebalance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A move whose catch-up fails after its fence (a column added on the source
// to a table the move replicates, so that the target's apply worker stops
// at the next change and the wait for the fence's mark runs out) gives the
// source back, and the refused window it reports, in its result and in
// the journal, runs from the fence to the give-back: at least the time the
// fence was held. Failed before: REFUSED said 0 s (the journal counted a
// window only at a flip).
func TestRefusedWindowOfAMoveGivenBack(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	const shard = 1
	r := openRouter(t, cfg)
	routeLikes(t, r, shard, 20)
	from := clustertest.ClusterMap(t, cfg).Shards[shard].Host
	const wait = 3 * time.Second
	opts := MoveOptions{Migrations: sampleSet(t), CutoverTimeout: wait, Logger: testLogger(t)}
	opts.stopAfter = PhaseFenced
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	fenced := time.Now() // the fence is up: the move stopped after recording it
	require.Equal(t, shardmgr.StateMoving, clustertest.ClusterMap(t, cfg).Shards[shard].State)

	src := clustertest.HostPool(t, cfg, from)
	_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`ALTER TABLE %s ADD COLUMN extra int DEFAULT 1`, markTable(moveRecord(t, cfg, res.ID))))
	require.NoError(t, err)
	time.Sleep(time.Second)

	opts.stopAfter = ""
	res, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	held := time.Since(fenced)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrSourceFenced, "the source was given back")
	m := clustertest.ClusterMap(t, cfg)
	require.Equal(t, from, m.Shards[shard].Host)
	require.Equal(t, shardmgr.StateActive, m.Shards[shard].State)
	t.Logf("fence held at least %s (and %s waited for the mark); the move reports %s refused: %v", held, wait, res.Refused, err)
	// The fence was up from before fenced was taken until the give-back,
	// inside the second run: at least the second and the mark's wait.
	require.GreaterOrEqual(t, res.Refused, time.Second+wait)
	require.LessOrEqual(t, res.Refused, held+time.Minute)
	got, ok := moveRecord(t, cfg, res.ID).Refused()
	require.True(t, ok, "the journal records the window")
	require.Equal(t, res.Refused, got)
	routeLikes(t, r, shard, 5)
}

// A fenced move that is aborted records its refused window too, from the
// fence to the abort's give-back. Failed before: none was recorded.
func TestRefusedWindowOfAnAbortedMove(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	const shard = 1
	r := openRouter(t, cfg)
	routeLikes(t, r, shard, 20)
	opts := MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)}
	opts.stopAfter = PhaseFenced
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	fenced := time.Now()
	const hold = 2 * time.Second
	time.Sleep(hold)
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{shard})
	require.NoError(t, err)
	held := time.Since(fenced)
	rec := moveRecord(t, cfg, res.ID)
	require.Equal(t, PhaseAborted, rec.Phase)
	got, ok := rec.Refused()
	require.True(t, ok, "the journal records the window")
	t.Logf("fence held at least %s; the journal says %s", held, got)
	require.GreaterOrEqual(t, got, hold)
	require.LessOrEqual(t, got, held+time.Minute)
	routeLikes(t, r, shard, 5)
}

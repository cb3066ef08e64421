package rebalance

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// Issue 18, item 6: a shard holding a forged id (an explicit id with the
// largest time bits, which an INSERT-only role may write) still moves: the
// target's counter is carried past the source's counter and the genuine
// stored ids, not past the forged one, which the generator's advance now
// refuses, forced or not, and which used to exhaust the new home's counter
// for good. After the move the shard hands out ids.
func TestMoveDoesNotCarryTheCounterToAForgedID(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	m := clustertest.ClusterMap(t, cfg)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 50)
	forged := int64(math.MaxInt64)&^(1<<23-1) | 1<<10 | 3
	_, err := clustertest.HostPool(t, cfg, m.Shards[1].Host).Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (id, user_id, post_id) VALUES ($1, 1, 1)`, forged)
	require.NoError(t, err)
	genuine := likeIDs(t, cfg, 1)
	require.Equal(t, forged, genuine[len(genuine)-1])
	genuine = genuine[:len(genuine)-1]

	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		to := "pg4"
		if mode == MoveOffline {
			to = m.Shards[1].Host
		}
		_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, to, MoveOptions{Mode: mode, Migrations: sampleSet(t)})
		require.NoError(t, err, mode)
		before := likeIDs(t, cfg, 1)
		routeLikes(t, r, 1, 20)
		ids := likeIDs(t, cfg, 1)
		require.Len(t, ids, len(before)+20, "%s: the shard hands out ids on its new home", mode)
		for _, id := range ids[:len(ids)-1] {
			require.Less(t, id, forged)
		}
		require.Greater(t, ids[len(ids)-2], genuine[len(genuine)-1], mode)
	}
}

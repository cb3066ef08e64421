package migrate_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

// Issue 18, item 6: a shard holds a forged id (an INSERT with an explicit
// id of the largest time bits) when its generator is upgraded. The upgrade
// carries the counter past the ids a generator can have made (within the
// clock plus the advance's margin), not past the forged one, which used to
// exhaust the counter for good with a forced advance; it counts the forged
// ids, and the shard keeps handing out ids above every genuine one.
func TestUpgradeGeneratorsDoesNotCarryForgedIDs(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 2)
	m := clustertest.ClusterMap(t, cfg)
	p := shardPool(t, cfg, m, 1)
	want, err := shsql.Marker(catalog.GeneratorParams(m, 1))
	require.NoError(t, err)
	old := strings.Replace(want, fmt.Sprintf("generator v%d ", shsql.Version), fmt.Sprintf("generator v%d ", shsql.Version-1), 1)
	forged := int64(math.MaxInt64)&^(1<<23-1) | 1<<10 | 9
	near := clustertest.FutureID(1, 20*time.Minute, 4) // ahead, but within the margin: a genuine burst
	_, err = p.Exec(clustertest.Ctx(t), fmt.Sprintf(`COMMENT ON FUNCTION shard_0001.next_id() IS '%s';
		CREATE TABLE shard_0001.likes (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), user_id bigint, post_id bigint)`, old))
	require.NoError(t, err)
	insertLikes(t, p, "shard_0001", 20)
	_, err = p.Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (id, user_id, post_id) VALUES ($1, 1, 1), ($2, 1, 2)`, forged, near)
	require.NoError(t, err)
	_, err = p.Exec(clustertest.Ctx(t), `SELECT setval('shard_0001.next_id_counter', 1)`)
	require.NoError(t, err)

	res, err := migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{Shards: []int{1}})
	require.NoError(t, err)
	require.Len(t, res.Shards, 1)
	r := res.Shards[0]
	require.True(t, r.Upgraded)
	require.Equal(t, near, r.MaxID, "carried past the genuine ids only")
	require.EqualValues(t, 1, r.ForgedIDs)
	require.Equal(t, want, marker(t, p, "shard_0001"))

	ids := insertLikes(t, p, "shard_0001", 100)
	for _, id := range ids {
		require.Greater(t, id, near)
		require.Less(t, id, forged)
	}
	var last, max int64
	require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT last_value, (SELECT seqmax FROM pg_sequence WHERE seqrelid = 'shard_0001.next_id_counter'::regclass)
		FROM shard_0001.next_id_counter`).Scan(&last, &max))
	require.Less(t, last, max/2, "the counter is nowhere near its maximum")
}

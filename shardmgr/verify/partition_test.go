package verify

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// verify --deep reads a partitioned table whole: an id stored in a
// partition that was attached to the tree without the generator's
// DEFAULT (so no column of its own names the generator) is found in the
// wrong shard, and found once, not once per level of the tree.
func TestVerifyDeepReadsPartitionedTablesWhole(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	s0, s3 := m.Shards[0], m.Shards[3]
	var id int64
	require.NoError(t, clustertest.HostPool(t, cfg, s0.Host).QueryRow(clustertest.Ctx(t), fmt.Sprintf("SELECT max(id) FROM %s.items", s0.Schema)).Scan(&id))
	exec(t, cfg, s3.Host, fmt.Sprintf(`CREATE TABLE %[1]s.ev (id bigint NOT NULL DEFAULT %[1]s.next_id(), day int NOT NULL) PARTITION BY RANGE (day);
		CREATE TABLE %[1]s.ev_new PARTITION OF %[1]s.ev FOR VALUES FROM (10) TO (20) PARTITION BY RANGE (day);
		CREATE TABLE %[1]s.ev_new_a PARTITION OF %[1]s.ev_new FOR VALUES FROM (10) TO (20);
		INSERT INTO %[1]s.ev (day) SELECT 10 + g FROM generate_series(1, 5) g;
		CREATE TABLE %[1]s.ev_old (id bigint NOT NULL, day int NOT NULL);
		INSERT INTO %[1]s.ev_old VALUES (%[2]d, 1);
		ALTER TABLE %[1]s.ev ATTACH PARTITION %[1]s.ev_old FOR VALUES FROM (0) TO (10)`, s3.Schema, id))

	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{Deep: true})
	require.NoError(t, err)
	require.False(t, rep.OK)
	var stored, dups []string
	for _, p := range rep.Problems {
		switch p.Check {
		case CheckStoredShard:
			stored = append(stored, p.Detail)
			require.Equal(t, 3, p.Shard)
		case CheckDuplicateID:
			dups = append(dups, p.Detail)
		default:
			t.Errorf("unexpected problem: %v", p)
		}
	}
	require.Len(t, stored, 1, "%v", rep.Problems)
	require.Contains(t, stored[0], s3.Schema+".ev.id")
	require.Len(t, dups, 1, "the copied id, once: %v", rep.Problems)
	require.Contains(t, dups[0], fmt.Sprint(id))
}

package hosts_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// TestListShowsMovesApartFromStandbys: during an online move the source's
// logical replication sender is no standby (a failover decision reads
// standbys); it is listed under moves, with the move's id, shard and
// target.
func TestListShowsMovesApartFromStandbys(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6) // pg1: 0,1  pg2: 2,3  pg3: 4,5
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	c := open(t, cfg)
	_, err = migrate.Migrate(clustertest.Ctx(t), c, set, migrate.Options{})
	require.NoError(t, err)
	h1, ok := cfg.Host("pg1")
	require.True(t, ok)
	_, err = clustertest.Pool(t, h1.DSN).Exec(clustertest.Ctx(t), `INSERT INTO shard_0000.likes (user_id, post_id) SELECT g, 1 FROM generate_series(1, 100) g`)
	require.NoError(t, err)

	var (
		once   sync.Once
		list   []hosts.Host
		lerr   error
		moveID int64
	)
	res, err := rebalance.MoveShard(clustertest.Ctx(t), c, 0, "pg2", rebalance.MoveOptions{Migrations: set,
		Progress: func(p rebalance.MoveProgress) {
			if p.Phase == rebalance.PhaseCatchup {
				once.Do(func() {
					// The target's apply worker connected: the source has a
					// walsender for it.
					require.Eventually(t, func() bool {
						var n int
						require.NoError(t, clustertest.Pool(t, h1.DSN).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_stat_replication`).Scan(&n))
						return n > 0
					}, 2*time.Minute, 50*time.Millisecond)
					moveID = p.ID
					list, lerr = hosts.List(clustertest.Ctx(t), open(t, cfg), hosts.ListOptions{})
				})
			}
		}})
	require.NoError(t, err)
	require.NoError(t, lerr)
	require.NotNil(t, list, "the move never reported its catch-up")
	require.Equal(t, moveID, res.ID)
	var src *hosts.Host
	for i := range list {
		require.NotNil(t, list[i].Server, list[i].Name)
		require.Empty(t, list[i].Server.Standbys, "%s: a move's replication is not a standby", list[i].Name)
		if list[i].Name == "pg1" {
			src = &list[i]
		} else {
			require.Empty(t, list[i].Server.Moves, list[i].Name)
		}
	}
	require.NotNil(t, src)
	require.Len(t, src.Server.Moves, 1)
	m := src.Server.Moves[0]
	require.Equal(t, res.ID, m.ID)
	require.Equal(t, 0, m.Shard)
	require.Equal(t, "pg2", m.To)
	require.NotEmpty(t, m.Slot)

	// Once the move is done its slot is gone: nothing listed.
	list, err = hosts.List(clustertest.Ctx(t), c, hosts.ListOptions{})
	require.NoError(t, err)
	for _, h := range list {
		require.Empty(t, h.Server.Moves, h.Name)
	}
}

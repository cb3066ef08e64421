package rebalance

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// An unlogged table cannot be published: the preflight of an online move
// names it (with ALTER TABLE ... SET LOGGED as the way out) before
// anything changes, and auto moves the shard offline, saying why. Failed
// before: the preflight passed, auto chose online, and the move failed at
// CREATE PUBLICATION.
func TestPreflightNamesUnloggedTables(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	m := clustertest.ClusterMap(t, cfg)
	const shard = 1
	from, schema := m.Shards[shard].Host, m.Shards[shard].Schema
	likes := pgx.Identifier{schema, "likes"}.Sanitize()
	_, err := clustertest.HostPool(t, cfg, from).Exec(clustertest.Ctx(t), `ALTER TABLE `+likes+` SET UNLOGGED`)
	require.NoError(t, err)
	r := openRouter(t, cfg)
	routeLikes(t, r, shard, 20)
	want := likeIDs(t, cfg, shard)

	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, ErrPreflight)
	c := failedCheck(t, err, from, CheckLogged)
	require.Equal(t, []int{shard}, c.Shards)
	require.Equal(t, "unlogged tables: "+likes, c.Value)
	require.Equal(t, &Fix{Offline: true, SQL: "ALTER TABLE " + likes + " SET LOGGED"}, c.Fix)
	var moves int
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM shardid.moves`).Scan(&moves))
	require.Zero(t, moves, "journal rows")

	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t), Mode: MoveAuto, Keep: new(time.Duration)})
	require.NoError(t, err)
	require.Equal(t, MoveOffline, res.Mode)
	require.Equal(t, "likes is unlogged (logical replication publishes no unlogged table)", res.ModeReason)
	require.Equal(t, want, likeIDs(t, cfg, shard))
}

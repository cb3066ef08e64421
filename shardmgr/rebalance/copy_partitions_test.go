package rebalance

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A partition detached on the source while an online move follows it
// (after the scans, before the fence) stays attached on the target, as
// logical replication carries no DDL: the move's verification compares the
// partition trees and refuses to flip, naming the partition, and the
// source serves on. Failed before: the move finished, and the detached
// partition's rows showed through the parent again on the new host.
func TestMoveVerifyComparesPartitionTrees(t *testing.T) {
	t.Parallel()
	cfg, set := partitionCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	const shard = 1
	seedPartitions(t, r, shard, 50)
	m := clustertest.ClusterMap(t, cfg)
	schema := m.Shards[shard].Schema
	opts := MoveOptions{Migrations: set, Logger: testLogger(t)}
	opts.afterScans = func(ctx context.Context, src, dst *pgxpool.Pool) error {
		_, err := src.Exec(ctx, `ALTER TABLE `+pgx.Identifier{schema, "events"}.Sanitize()+` DETACH PARTITION `+pgx.Identifier{schema, "events_p0"}.Sanitize())
		return err
	}
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.ErrorIs(t, err, ErrMoveCheck)
	require.ErrorContains(t, err, "the partition trees differ: "+schema+".events_p0 is a partition of "+schema+".events FOR VALUES FROM ('2000-01-01') TO ('2025-01-01') on the target, not on the source")
	m2 := clustertest.ClusterMap(t, cfg)
	require.Equal(t, m.Shards[shard].Host, m2.Shards[shard].Host)
	require.Equal(t, shardmgr.StateActive, m2.Shards[shard].State, "the source is given back")
}

package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/stretchr/testify/require"
)

// moveCluster initialises shards logical shards on three hosts, migrates
// them with the sample migrations (a likes table) and adds a fourth host,
// pg4, to the cluster file only: the user's first step before a
// rebalance.
func moveCluster(t *testing.T, shards int) *Config {
	t.Helper()
	cfg := initCluster(t, shards)
	_, err := Migrate(ctx(t), cfg, sampleSet(t), MigrateOptions{})
	require.NoError(t, err)
	addHost(t, cfg, "pg4")
	return cfg
}

// addHost adds a host on the fourth shared server, with a database of
// this test's own, to cfg.
func addHost(t *testing.T, cfg *Config, name string) {
	t.Helper()
	s := pgtest.Servers(t, 4)[3]
	db := fmt.Sprintf("%s_%s", cfg.Cluster, name)
	dropLater(t, s, db)
	cfg.Hosts = append(cfg.Hosts, Host{Name: name, DSN: s.DSN(db)})
	require.NoError(t, cfg.ValidateCluster())
}

// routeLikes inserts n rows into shard's likes table through the router.
func routeLikes(t *testing.T, r *Router, shard, n int) {
	t.Helper()
	err := r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) SELECT g, g %% 100 FROM generate_series(1, $1) g`, s.Table("likes")), n)
		return err
	})
	require.NoError(t, err)
}

func openRouter(t *testing.T, cfg *Config, opts ...RouterOption) *Router {
	t.Helper()
	r, err := Open(ctx(t), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

// likeIDs reads shard's like ids from the host the catalog places it on.
func likeIDs(t *testing.T, cfg *Config, shard int) []int64 {
	t.Helper()
	m := clusterMap(t, cfg)
	p := hostPool(t, cfg, m.Shards[shard].Host)
	rows, err := p.Query(ctx(t), fmt.Sprintf(`SELECT id FROM %s ORDER BY id`, pgx.Identifier{m.Shards[shard].Schema, "likes"}.Sanitize()))
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

func requireVerifyOK(t *testing.T, cfg *Config) {
	t.Helper()
	rep, err := Verify(ctx(t), cfg, VerifyOptions{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify: %v", rep.Problems)
}

// replicationLeftovers counts publications, subscriptions and slots named
// like a move's on the cluster's hosts.
func replicationLeftovers(t *testing.T, cfg *Config, names ...string) int {
	t.Helper()
	n := 0
	for _, h := range cfg.Hosts {
		p := hostPool(t, cfg, h.Name)
		var c int
		require.NoError(t, p.QueryRow(ctx(t), `SELECT (SELECT count(*) FROM pg_publication WHERE pubname = ANY($1))
			+ (SELECT count(*) FROM pg_subscription WHERE subname = ANY($1))
			+ (SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY($1))`, names).Scan(&c))
		n += c
	}
	return n
}

func moveRecord(t *testing.T, cfg *Config, id int64) *MoveRecord {
	t.Helper()
	recs, err := readMoves(ctx(t), pool(t, cfg.Catalog), `id = $1`, id)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	return recs[0]
}

func TestMoveOfflineThenOnlineBack(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 6)
	r := openRouter(t, cfg, WithRefreshInterval(0))
	routeLikes(t, r, 1, 500)
	before := likeIDs(t, cfg, 1)

	res, err := MoveShard(ctx(t), cfg, 1, "pg4", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.EqualValues(t, 500, res.Rows)
	require.Equal(t, "shard_0001_moved_g"+fmt.Sprint(res.Generation), res.RetiredSchema)
	require.Equal(t, "pg4", clusterMap(t, cfg).Shards[1].Host)
	require.Equal(t, before, likeIDs(t, cfg, 1))
	requireVerifyOK(t, cfg)

	// The router follows the flip; new ids are above the old ones.
	routeLikes(t, r, 1, 10)
	after := likeIDs(t, cfg, 1)
	require.Len(t, after, 510)
	require.Greater(t, after[500], before[499])

	// The retired copy refuses writes and ids.
	src := hostPool(t, cfg, "pg1")
	retired := pgx.Identifier{res.RetiredSchema, "likes"}.Sanitize()
	_, err = src.Exec(ctx(t), fmt.Sprintf(`UPDATE %s SET post_id = 0`, retired))
	require.True(t, isFenceError(err), "%v", err)
	_, err = src.Exec(ctx(t), fmt.Sprintf(`INSERT INTO %s (id, user_id, post_id) VALUES (1, 1, 1)`, retired))
	require.True(t, isFenceError(err), "%v", err)
	_, err = src.Exec(ctx(t), fmt.Sprintf(`SELECT %s()`, pgx.Identifier{res.RetiredSchema, "next_id"}.Sanitize()))
	require.Error(t, err, "the retired generator hands out no id")

	// Back online: a move like any other.
	back, err := MoveShard(ctx(t), cfg, 1, "pg1", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, back.Phase)
	require.EqualValues(t, 510, back.Rows)
	require.Equal(t, after, likeIDs(t, cfg, 1))
	require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, back.ID).replName))
	requireVerifyOK(t, cfg)

	cl, err := Cleanup(ctx(t), cfg, CleanupOptions{All: true})
	require.NoError(t, err)
	require.Len(t, cl.Dropped, 2)
	requireVerifyOK(t, cfg)
}

var _ = errors.Is
var _ = time.Second
var _ *pgxpool.Pool

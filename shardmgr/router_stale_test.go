package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// requireHostSaid asserts that err is a *ShardError about shard on host
// whose cause is the host's SQLSTATE code.
func requireHostSaid(t testing.TB, err error, shard int, host, code string) {
	t.Helper()
	var se *ShardError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, shard, se.Shard)
	require.Equal(t, host, se.Host)
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "the host's error is kept as the cause: %v", err)
	require.Equal(t, code, pe.Code, "%v", err)
}

func TestStaleRouterAfterMoveGetsErrShardMoving(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	_, err := Migrate(ctx(t), cfg, sampleSet(t), MigrateOptions{})
	require.NoError(t, err)
	const shard = 1
	// Routers that never refresh on their own: their maps stay at the
	// generation before the move, like any router between the flip and its
	// next refresh.
	writer := openRouter(t, cfg, WithRefreshInterval(-1))
	gen := writer.Generation()
	from := writer.Map().Shards[shard].Host
	to := "pg3"
	require.NotEqual(t, from, to)
	generator := openRouter(t, cfg, WithRefreshInterval(-1))
	reader := openRouter(t, cfg, WithRefreshInterval(-1))
	routeLikes(t, writer, shard, 10)

	res, err := MoveShard(ctx(t), cfg, shard, to, MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.NotEmpty(t, res.RetiredSchema, "the source's schema was renamed")

	insert := func(ctx context.Context, tx pgx.Tx, s Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (1, 1)`, s.Table("likes")))
		return err
	}
	nextID := func(ctx context.Context, tx pgx.Tx, s Shard) error {
		var id int64
		return tx.QueryRow(ctx, "SELECT "+s.NextID()).Scan(&id)
	}
	count := func(ctx context.Context, tx pgx.Tx, s Shard) error {
		var n int64
		return tx.QueryRow(ctx, "SELECT count(*) FROM "+s.Table("likes")).Scan(&n)
	}
	for _, c := range []struct {
		name  string
		r     *Router
		write bool
		fn    func(context.Context, pgx.Tx, Shard) error
		code  string // what the old host says
	}{
		{"insert into a table of the renamed schema", writer, true, insert, pgerrcode.UndefinedTable},
		{"the generator of the renamed schema", generator, true, nextID, pgerrcode.InvalidSchemaName},
		{"a read of the renamed schema", reader, false, count, pgerrcode.UndefinedTable},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, gen, c.r.Generation(), "the router's map predates the flip")
			run := c.r.ReadTx
			if c.write {
				run = c.r.Tx
			}
			err := run(ctx(t), shard, c.fn)
			require.ErrorIs(t, err, ErrShardMoving)
			requireHostSaid(t, err, shard, from, c.code)

			// The router reloaded its map: the retry goes to the new host.
			require.Equal(t, res.Generation, c.r.Generation())
			var host string
			require.NoError(t, run(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s Shard) error {
				host = s.Host
				return c.fn(ctx, tx, s)
			}))
			require.Equal(t, to, host)
		})
	}
	require.Len(t, likeIDs(t, cfg, shard), 11, "the retried insert is on the new host")

	// The same errors from a shard that did not move are the host's own.
	stay := 0
	require.Equal(t, writer.Map().Shards[stay].Host, clusterMap(t, cfg).Shards[stay].Host)
	err = writer.Tx(ctx(t), stay, func(ctx context.Context, tx pgx.Tx, s Shard) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+s.Table("no_such_table")+" VALUES (1)")
		return err
	})
	require.NotErrorIs(t, err, ErrShardMoving)
	requireHostSaid(t, err, stay, writer.Map().Shards[stay].Host, pgerrcode.UndefinedTable)
}

func TestRouterFencedCopyIsErrShardMoving(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	_, err := Migrate(ctx(t), cfg, sampleSet(t), MigrateOptions{})
	require.NoError(t, err)
	r := openRouter(t, cfg, WithRefreshInterval(-1))
	const shard = 2
	s, err := r.Shard(shard)
	require.NoError(t, err)
	// A fence as a move's cut-over raises it on the source, the catalog
	// not (yet) saying moving.
	require.NoError(t, installFence(ctx(t), hostPool(t, cfg, s.Host), s.Schema, true))

	err = r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (1, 1)`, s.Table("likes")))
		return err
	})
	require.ErrorIs(t, err, ErrShardMoving)
	requireHostSaid(t, err, shard, s.Host, FenceSQLState)

	// Wrapped by the caller's function, it is still recognised.
	err = r.Tx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s`, s.Table("likes")))
		return fmt.Errorf("clean likes: %w", err)
	})
	require.ErrorIs(t, err, ErrShardMoving)

	// Reads of a fenced copy go on.
	require.NoError(t, r.ReadTx(ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s Shard) error {
		var n int64
		return tx.QueryRow(ctx, "SELECT count(*) FROM "+s.Table("likes")).Scan(&n)
	}))
}

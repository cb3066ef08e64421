package shardmgr

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Exec runs one statement on the host of shard id outside a transaction
// (autocommit): one round trip, where Tx takes three (BEGIN, the
// statement, COMMIT). It is a write, refused as Tx refuses one: a
// read-only or moving shard, a map unconfirmed past WithMaxUnconfirmed, a shard the
// hosts show the catalog to place wrongly; a statement that reaches a
// fenced copy, or the host a shard moved away from, is ErrShardMoving and
// the map is reloaded. WithRetryMoving applies: a statement the fence
// refused did not happen, so running it again is safe. Use Tx for more
// than one statement.
func (r *Router) Exec(ctx context.Context, id int, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := r.untilMoved(ctx, func() error {
		s, p, err := r.route(ctx, id, true)
		if err != nil {
			return err
		}
		tag, err = p.Exec(ctx, sql, args...)
		if err != nil {
			return r.shardFailed(ctx, s, err)
		}
		return nil
	})
	return tag, err
}

// QueryRow runs one statement that returns at most one row (an INSERT
// ... RETURNING id) on the host of shard id outside a transaction, as
// Exec does, and scans the row into dest: pgx.ErrNoRows when there is
// none. The same refusals and retries as Exec.
func (r *Router) QueryRow(ctx context.Context, id int, dest []any, sql string, args ...any) error {
	return r.untilMoved(ctx, func() error {
		s, p, err := r.route(ctx, id, true)
		if err != nil {
			return err
		}
		if err := p.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
			if err == pgx.ErrNoRows {
				return err
			}
			return r.shardFailed(ctx, s, err)
		}
		return nil
	})
}

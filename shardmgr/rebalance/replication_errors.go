package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
)

// The target's apply worker reports a failure only in its server's log;
// pg_stat_subscription_stats counts them (apply_error_count,
// sync_error_count) for as long as the subscription lives. A move counts
// them from a baseline it takes when it (re)starts the subscription in this
// run, so that a failure the worker recovered from before (a source
// restarted during an earlier run's catch-up: "could not connect to the
// publisher") does not fail every resume. A new failure is reported with
// what the move can see of its cause: the columns of the shard's tables
// compared on both hosts (a DDL on the source during the move makes the
// worker fail with "missing replicated column" until the target has the
// column too).

// applyWatch is a subscription's failures counted from a baseline.
type applyWatch struct {
	sub  string
	base int64
}

// applyErrors reads subscription sub's failure count on the target (0
// before its statistics exist, and on PostgreSQL 14, which keeps none:
// pg_stat_subscription_stats came with 15; there a failing worker shows
// as a catch-up that does not end).
func applyErrors(ctx context.Context, dst shardmgr.Querier, sub string) (int64, error) {
	var kept bool
	if err := dst.QueryRow(ctx, `SELECT pg_catalog.to_regclass('pg_catalog.pg_stat_subscription_stats') IS NOT NULL`).Scan(&kept); err != nil || !kept {
		return 0, err
	}
	var n int64
	err := dst.QueryRow(ctx, `SELECT coalesce((SELECT st.apply_error_count + st.sync_error_count FROM pg_catalog.pg_stat_subscription_stats st
		WHERE st.subid = s.oid), 0)
		FROM pg_catalog.pg_subscription s
		WHERE s.subname = $1 AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())`, sub).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// watchApply takes the baseline of sub's failures.
func watchApply(ctx context.Context, dst shardmgr.Querier, sub string) (*applyWatch, error) {
	n, err := applyErrors(ctx, dst, sub)
	if err != nil {
		return nil, err
	}
	return &applyWatch{sub: sub, base: n}, nil
}

// check fails when the worker failed since the baseline, naming what it
// can of the cause.
func (w *applyWatch) check(ctx context.Context, mv *move) error {
	n, err := applyErrors(ctx, mv.dst, w.sub)
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	if n <= w.base {
		return nil
	}
	return fmt.Errorf("target %s: %w: its apply worker for subscription %s failed %d times during this run%s",
		mv.To, ErrReplicationFailed, w.sub, n-w.base, replicationCause(ctx, mv))
}

// replicationCause is what the move can tell of why the target's apply
// worker fails, as a clause to append to an error ("" when nothing): the
// shard's tables whose columns differ between the hosts.
func replicationCause(ctx context.Context, mv *move) string {
	diffs, err := columnDiffs(ctx, mv)
	if err != nil || len(diffs) == 0 {
		return " (the target server's log says why)"
	}
	return ": " + strings.Join(diffs, "; ") + ` (a DDL on the source during the move: the worker fails with "missing replicated column" until the target has them too; abort the move, or make the same change on the target)`
}

// columnDiffs compares the columns of the shard's tables on both hosts:
// one phrase per column the source has and the target lacks.
func columnDiffs(ctx context.Context, mv *move) ([]string, error) {
	read := func(q shardmgr.Querier) (map[string]bool, error) {
		rows, err := q.Query(ctx, `SELECT pg_catalog.format('%I.%I', c.relname, a.attname)
			FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped`, mv.Schema)
		if err != nil {
			return nil, err
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		out := map[string]bool{}
		for _, c := range cols {
			out[c] = true
		}
		return out, err
	}
	src, err := read(mv.src)
	if err != nil {
		return nil, err
	}
	dst, err := read(mv.dst)
	if err != nil {
		return nil, err
	}
	var diffs []string
	for c := range src {
		if !dst[c] {
			diffs = append(diffs, fmt.Sprintf("column %s.%s on the source is missing on the target", pgx.Identifier{mv.Schema}.Sanitize(), c))
		}
	}
	slices.Sort(diffs)
	return diffs, nil
}

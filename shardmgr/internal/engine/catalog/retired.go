package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// JournaledRetired lists the retired copies the journal knows and has not
// dropped, as host -> retired schema names: what rebalance cleanup will
// drop, and what a repair need not journal again.
func JournaledRetired(ctx context.Context, q pg.Querier) (map[string]map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT from_host, retired_schema FROM shardid.moves
		WHERE retired_schema IS NOT NULL AND retired_dropped_at IS NULL`)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{}
	var host, schema string
	_, err = pgx.ForEachRow(rows, []any{&host, &schema}, func() error {
		if out[host] == nil {
			out[host] = map[string]bool{}
		}
		out[host][schema] = true
		return nil
	})
	return out, err
}

// JournalRetired records, inside a catalog change, a retired copy
// (retired, of shard's schema, kept on host from since the flip at
// generation flipGen) that the journal lost, as a finished move from
// from to to (the shard's home now) whose keep period is over: so that
// rebalance cleanup drops it and host removal waits for it, as for any
// move's retired copy. why goes into the move's error column.
func JournalRetired(ctx context.Context, tx pgx.Tx, shard int, schema, retired, from, to string, flipGen int64, why string) error {
	_, err := tx.Exec(ctx, `INSERT INTO shardid.moves (shard, from_host, to_host, mode, phase, repl_name, schema_name, retired_schema,
			flip_generation, keep_until, finished_at, error)
		VALUES ($1, $2, $3, 'offline', $4, $5, $6, $7, $8, pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp(), $9)`,
		shard, from, to, string(PhaseCleaned), fmt.Sprintf("shardid_journaled_%s_%s", from, retired), schema, retired, flipGen, why)
	return err
}

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

// LostRetired is a retired copy on a host that the journal lost (a
// catalog restored from an older backup), as JournalRetired records it.
type LostRetired struct {
	// Shard is the shard whose copy it is, and Schema the shard's schema
	// (the live copy's name).
	Shard  int
	Schema string
	// Retired is the retired copy's schema, kept on From.
	Retired string
	// From is the host that keeps the retired copy; To the shard's home
	// now.
	From, To string
	// FlipGeneration is the generation of the flip that retired it.
	FlipGeneration int64
	// Why goes into the move's error column.
	Why string
}

// JournalRetired records r, inside a catalog change, as a finished move
// from r.From to r.To whose keep period is over: so that rebalance
// cleanup drops the copy and host removal waits for it, as for any
// move's retired copy.
func JournalRetired(ctx context.Context, tx pgx.Tx, r LostRetired) error {
	_, err := tx.Exec(ctx, `INSERT INTO shardid.moves (shard, from_host, to_host, mode, phase, repl_name, schema_name, retired_schema,
			flip_generation, keep_until, finished_at, error)
		VALUES ($1, $2, $3, 'offline', $4, $5, $6, $7, $8, pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp(), $9)`,
		r.Shard, r.From, r.To, string(PhaseCleaned), fmt.Sprintf("shardid_journaled_%s_%s", r.From, r.Retired), r.Schema, r.Retired, r.FlipGeneration, r.Why)
	return err
}

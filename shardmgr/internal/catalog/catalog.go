package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardid/shardid/shardmgr"

	shsql "github.com/shardid/shardid/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/shardmgr/internal/pg"
)

// LockClass is the first key of the transaction-scoped advisory
// lock that serialises catalog changes: 'shca'.
const LockClass = 0x73686361

// Change runs fn in one catalog transaction that holds the catalog
// lock and the cluster row, checks that the generation is still want (0:
// any), and bumps the generation with a record of what changed. It returns
// the new generation.
func Change(ctx context.Context, pool *pgxpool.Pool, want int64, what string, fn func(tx pgx.Tx, gen int64) error) (int64, error) {
	var next int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, LockClass); err != nil {
			return err
		}
		var gen int64
		if err := tx.QueryRow(ctx, `SELECT generation FROM shardid.cluster FOR UPDATE`).Scan(&gen); err != nil {
			if errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err) {
				return shardmgr.ErrNotInitialized
			}
			return err
		}
		if want != 0 && gen != want {
			return &shardmgr.GenerationError{Want: want, Got: gen}
		}
		next = gen + 1
		if err := fn(tx, next); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE shardid.cluster SET generation = $1, updated_at = now()`, next); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO shardid.changes (generation, what) VALUES ($1, $2)`, next, what)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("catalog change (%s): %w", what, err)
	}
	return next, nil
}

// SetShardState changes a shard's state in the catalog, guarded by the
// generation the caller last read (want; 0 skips the guard). It returns
// the new generation. Of two managers changing the catalog from the same
// generation, exactly one wins; the other gets a *GenerationError.
func SetShardState(ctx context.Context, catalog *pgxpool.Pool, shard int, state shardmgr.State, want int64) (int64, error) {
	if !state.Valid() {
		return 0, fmt.Errorf("shard %d: invalid state %q (active, read-only, moving)", shard, state)
	}
	return Change(ctx, catalog, want, fmt.Sprintf("shard %d -> %s", shard, state), func(tx pgx.Tx, gen int64) error {
		tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET state = $2, changed_generation = $3 WHERE id = $1`, shard, string(state), gen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &shardmgr.ShardError{Shard: shard, Err: shardmgr.ErrUnknownShard}
		}
		return nil
	})
}

// ReadClusterMap reads the map from the catalog named in cfg.
func ReadClusterMap(ctx context.Context, cfg *shardmgr.Config) (*shardmgr.ShardMap, error) {
	pool, err := pg.OpenPool(ctx, cfg.Catalog, 1)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	defer pool.Close()
	m, err := shardmgr.ReadMap(ctx, pool)
	if err != nil {
		if errors.Is(err, shardmgr.ErrNotInitialized) {
			return nil, err
		}
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return m, nil
}

// GeneratorParams is what the catalog expects shard id's generator to be.
func GeneratorParams(m *shardmgr.ShardMap, id int) shsql.Params {
	return shsql.Params{
		Shard: id, Schema: m.Shards[id].Schema, Variant: m.Variant, Epoch: m.Layout.Epoch,
		TimeBits: m.Layout.TimeBits, ShardBits: m.Layout.ShardBits, SeqBits: m.Layout.SeqBits,
	}
}

// Generation reads the catalog's current generation (an error wrapping
// shardmgr.ErrNotInitialized when it holds no cluster).
func Generation(ctx context.Context, q shardmgr.Querier) (int64, error) {
	m, err := shardmgr.ReadMap(ctx, q)
	if err != nil {
		return 0, err
	}
	return m.Generation, nil
}

// OpenMoves is the SQL predicate on shardid.moves of an unfinished move:
// the one the catalog's moves_open_shard_idx enforces one of per shard.
const OpenMoves = `phase NOT IN ('cleaned', 'aborted')`

package rebalance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// carryCounter raises the target's counter past the source's last value
// and every id stored, and its other sequences to the source's, so the
// target can never repeat an id the source handed out, whatever its clock.
func (mo *mover) carryCounter(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) error {
	seq := pgx.Identifier{rec.Schema, shsql.CounterName}.Sanitize()
	var last int64
	if err := src.QueryRow(ctx, `SELECT last_value FROM `+seq).Scan(&last); err != nil {
		return fmt.Errorf("source %s: read %s: %w", rec.From, seq, err)
	}
	floor := shardschema.IDOfCounter(mo.m.Layout, last, rec.Shard)
	stored, err := shardschema.MaxGenuineID(ctx, dst, rec.Schema, mo.m.Layout, shsql.AdvanceMarginMS) // forged ids are not carried
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	floor = max(floor, stored)
	if rec.counterMax == nil {
		return fmt.Errorf("move %d: the journal has no counter range (phase schema not recorded)", rec.ID)
	}
	// The target's counter stays stopped until the flip: it is let run
	// only for the carry, in one transaction that holds the counter's
	// lock, so no id leaves the incoming copy before the flip.
	// force: the floor comes from ids the source really handed out, which
	// may lie beyond the hour next_id_advance allows ahead of this host's
	// clock (a source clock ahead, an earlier forced advance).
	// Writes are refused meanwhile: each try waits at most LockTimeout for
	// the generator's lock, which any role that may connect to the target
	// can hold (an advisory lock), and a wait that runs out names it.
	start := time.Now()
	err = pg.WithLockRetry(ctx, dst, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := fence.UnclampCounter(ctx, tx, rec.Schema, *rec.counterMax); err != nil {
			return err
		}
		var got int64
		if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT %s($1, force => true)`, pgx.Identifier{rec.Schema, shsql.AdvanceName}.Sanitize()), floor).Scan(&got); err != nil {
			return err
		}
		_, err := fence.ClampCounter(ctx, tx, rec.Schema, rec.Shard)
		return err
	})
	if pg.IsLockTimeout(err) {
		err = shardschema.GeneratorLockWait(ctx, dst, rec.Shard, start)
	}
	if err != nil {
		return fmt.Errorf("target %s: carry the counter: %w", rec.To, err)
	}
	// Other sequences in the schema (bigserial columns): logical
	// replication does not carry them either.
	rows, err := src.Query(ctx, `SELECT sequencename, last_value FROM pg_catalog.pg_sequences
		WHERE schemaname = $1 AND sequencename <> $2 AND last_value IS NOT NULL`, rec.Schema, shsql.CounterName)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	type seqVal struct {
		name string
		last int64
	}
	vals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (seqVal, error) {
		var v seqVal
		return v, r.Scan(&v.name, &v.last)
	})
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	for _, v := range vals {
		q := pgx.Identifier{rec.Schema, v.name}.Sanitize()
		if _, err := dst.Exec(ctx, fmt.Sprintf(`SELECT pg_catalog.setval(%s, $1) FROM %s WHERE NOT is_called OR last_value < $1`, pg.QuoteLiteral(q), q), v.last); err != nil {
			return fmt.Errorf("target %s: carry %s: %w", rec.To, q, err)
		}
	}
	return nil
}

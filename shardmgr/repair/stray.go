package repair

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

var (
	// ErrNotStray: the copy named is not a stray one (the catalog places
	// the shard on that host, a move uses it, it is a retired copy, or
	// there is no copy there). Nothing was changed.
	ErrNotStray = errors.New("not a stray copy")
	// ErrStrayHasRows: the stray copy holds rows its live copy lacks
	// (see *StrayRowsError). Nothing was changed.
	ErrStrayHasRows = errors.New("the stray copy holds rows the live copy lacks")
)

// StrayRowsError names the tables of a stray copy whose rows the live
// copy lacks, with how many.
type StrayRowsError struct {
	Host, Schema string
	// Tables maps a table to the number of its rows whose primary key
	// the live copy lacks (for a table without a primary key: its rows).
	Tables map[string]int64
}

func (e *StrayRowsError) Error() string {
	parts := make([]string, 0, len(e.Tables))
	for _, t := range slices.Sorted(maps.Keys(e.Tables)) {
		parts = append(parts, fmt.Sprintf("%s: %d", t, e.Tables[t]))
	}
	return fmt.Sprintf("%v: %s on %s (%s)", ErrStrayHasRows, e.Schema, e.Host, strings.Join(parts, ", "))
}

func (e *StrayRowsError) Unwrap() error { return ErrStrayHasRows }

// strayBatch is how many keys DropStray sends to the live copy at once.
const strayBatch = 10000

// DefaultStrayLockWait bounds each lock DropStray waits for.
const DefaultStrayLockWait = 30 * time.Second

// StrayDrop is what DropStray dropped. JSON:
// {"shard":N,"host":"...","schema":"...","live_host":"...","tables":N,"rows":N}.
type StrayDrop struct {
	Shard    int    `json:"shard"`
	Host     string `json:"host"`
	Schema   string `json:"schema"`
	LiveHost string `json:"live_host"`
	Tables   int    `json:"tables"`
	// Rows is how many rows the stray copy held (each one also in the
	// live copy).
	Rows int64 `json:"rows"`
}

// DropStray drops host's stray copy of shard: a copy the catalog does not
// place there (an init against a mistyped or empty catalog leaves one).
// It refuses (ErrNotStray) unless the catalog places the shard on another
// host and host's copy is neither a move's nor a retired copy; it refuses
// (*StrayRowsError) when the stray copy holds a row whose primary key the
// live copy lacks, table by table. Then it drops the schema and host's
// local_shards row for the shard, in one transaction that holds the
// stray's tables locked from the comparison on (each lock waits at most
// lockWait; zero: DefaultStrayLockWait).
func DropStray(ctx context.Context, c *cluster.Cluster, shard int, host string, lockWait time.Duration) (*StrayDrop, error) {
	cfg := c.Config()
	if err := cfg.CheckShard(shard); err != nil {
		return nil, err
	}
	if _, ok := cfg.Host(host); !ok {
		return nil, fmt.Errorf("%w: %q", shardmgr.ErrUnknownHost, host)
	}
	if lockWait <= 0 {
		lockWait = DefaultStrayLockWait
	}
	cat, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	m, err := shardmgr.ReadMap(ctx, cat)
	if err != nil {
		return nil, fmt.Errorf("catalog: read the map: %w", err)
	}
	if shard >= len(m.Shards) {
		return nil, &shardmgr.ShardError{Shard: shard, Err: shardmgr.ErrUnknownShard}
	}
	live := m.Shards[shard]
	if live.Host == host {
		return nil, fmt.Errorf("%w: the catalog places shard %d on %s: that is its live copy", ErrNotStray, shard, host)
	}
	open, err := catalog.ReadOpenMoves(ctx, cat)
	if err != nil {
		return nil, fmt.Errorf("catalog: read the open moves: %w", err)
	}
	if mv, ok := open[shard]; ok && (mv.From == host || mv.To == host) {
		return nil, fmt.Errorf("%w: shard %d's copy on %s belongs to unfinished move %d", ErrNotStray, shard, host, mv.ID)
	}
	schema := live.Schema
	hp, err := c.Host(ctx, host, shardmgr.UseWrite)
	if err != nil {
		return nil, pg.OnHost(host, err)
	}
	retired, err := fence.ReadRetired(ctx, hp)
	if err != nil {
		return nil, fmt.Errorf("host %s: read retired copies: %w", host, err)
	}
	if _, ok := retired[schema]; ok {
		return nil, fmt.Errorf("%w: %s on %s is a retired copy (rebalance cleanup drops those)", ErrNotStray, schema, host)
	}
	lp, err := c.Host(ctx, live.Host, shardmgr.UseRead)
	if err != nil {
		return nil, pg.OnHost(live.Host, err)
	}

	tx, err := hp.Begin(ctx)
	if err != nil {
		return nil, pg.OnHost(host, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", max(lockWait.Milliseconds(), 1))); err != nil {
		return nil, pg.OnHost(host, err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return nil, pg.OnHost(host, err)
	}
	if !exists {
		return nil, fmt.Errorf("%w: host %s has no schema %s", ErrNotStray, host, schema)
	}
	// DROP ... CASCADE only of a schema the toolkit made: one of another
	// role is not a copy the toolkit left (and its owner decides what
	// goes with it).
	if err := pgtrust.CheckNamed(ctx, tx, []string{schema}); err != nil {
		return nil, fmt.Errorf("host %s: %w", host, err)
	}
	tables, err := fence.ShardTables(ctx, tx, schema)
	if err != nil {
		return nil, fmt.Errorf("host %s: list the tables of %s: %w", host, schema, err)
	}
	out := &StrayDrop{Shard: shard, Host: host, Schema: schema, LiveHost: live.Host, Tables: len(tables)}
	missing := map[string]int64{}
	for _, t := range tables {
		qt := pgx.Identifier{schema, t}.Sanitize()
		// No write reaches the stray copy between the comparison and the drop.
		if _, err := tx.Exec(ctx, "LOCK TABLE "+qt+" IN EXCLUSIVE MODE"); err != nil {
			if pg.IsLockTimeout(err) {
				return nil, fmt.Errorf("host %s: waited %v for the lock on %s (a session holds it): %w", host, lockWait, qt, err)
			}
			return nil, fmt.Errorf("host %s: lock %s: %w", host, qt, err)
		}
		n, rows, err := strayOnly(ctx, tx, lp, schema, t)
		if err != nil {
			return nil, fmt.Errorf("compare %s on %s with %s: %w", qt, host, live.Host, err)
		}
		out.Rows += rows
		if n > 0 {
			missing[t] = n
		}
	}
	if len(missing) > 0 {
		return nil, &StrayRowsError{Host: host, Schema: schema, Tables: missing}
	}
	if _, err := tx.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		if pg.IsLockTimeout(err) {
			return nil, fmt.Errorf("host %s: waited %v for the locks to drop schema %s: %w", host, lockWait, schema, err)
		}
		return nil, fmt.Errorf("host %s: drop schema %s: %w", host, schema, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM shardid.local_shards WHERE shard = $1 AND schema_name = $2`, shard, schema); err != nil && !pg.IsUndefinedTable(err) {
		if pg.IsLockTimeout(err) {
			return nil, fmt.Errorf("host %s: waited %v for the lock on shardid.local_shards: %w", host, lockWait, err)
		}
		return nil, fmt.Errorf("host %s: forget shard %d in shardid.local_shards: %w", host, shard, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, pg.OnHost(host, err)
	}
	return out, nil
}

// strayOnly counts the rows of table t of the stray copy (read in tx)
// whose primary key the live copy (lp) lacks, and the table's rows. A
// table without a primary key counts every row; a table the live copy
// lacks, too.
func strayOnly(ctx context.Context, tx pgx.Tx, lp pg.Querier, schema, t string) (only, total int64, err error) {
	qt := pgx.Identifier{schema, t}.Sanitize()
	pkRows, err := tx.Query(ctx, `SELECT a.attname FROM pg_catalog.pg_index i
		JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
		WHERE i.indrelid = $1::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`, qt)
	if err != nil {
		return 0, 0, err
	}
	pk, err := pgx.CollectRows(pkRows, pgx.RowTo[string])
	if err != nil {
		return 0, 0, err
	}
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+qt).Scan(&total); err != nil {
		return 0, 0, err
	}
	if total == 0 {
		return 0, 0, nil
	}
	var liveHas bool
	if err := lp.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, qt).Scan(&liveHas); err != nil {
		return 0, 0, err
	}
	if len(pk) == 0 || !liveHas {
		return total, total, nil
	}
	cols := make([]string, len(pk))
	match := make([]string, len(pk))
	for i, c := range pk {
		q := pgx.Identifier{c}.Sanitize()
		cols[i] = q
		match[i] = "l." + q + " = s." + q
	}
	// Keys go across in batches, as JSON read back into the live table's
	// row type, so that the live side's primary key index finds them.
	// Each batch starts after the last key of the one before (keyset, by
	// the stray's primary key index; OFFSET would read every earlier row
	// again).
	order := strings.Join(cols, ", ")
	var after *string // the last key sent, as JSON
	for {
		var keys []byte
		var n int
		err := tx.QueryRow(ctx, fmt.Sprintf(`WITH k AS (SELECT %[1]s FROM %[2]s
				WHERE $1::jsonb IS NULL OR (%[1]s) > (SELECT %[1]s FROM jsonb_populate_record(NULL::%[2]s, $1::jsonb))
				ORDER BY %[1]s LIMIT %[3]d)
			SELECT coalesce(jsonb_agg(to_jsonb(k) ORDER BY %[1]s), '[]'), count(*),
				(jsonb_agg(to_jsonb(k) ORDER BY %[1]s) -> -1)::text FROM k`,
			order, qt, strayBatch), after).Scan(&keys, &n, &after)
		if err != nil {
			return 0, 0, err
		}
		if n == 0 {
			break
		}
		var missing int64
		err = lp.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM jsonb_populate_recordset(NULL::%s, $1::jsonb) s
			WHERE NOT EXISTS (SELECT 1 FROM %s l WHERE %s)`, qt, qt, strings.Join(match, " AND ")), string(keys)).Scan(&missing)
		if err != nil {
			return 0, 0, err
		}
		only += missing
		if n < strayBatch {
			break
		}
	}
	return only, total, nil
}

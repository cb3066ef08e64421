package shardschema

import (
	"context"
	"fmt"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// CeilingID is the largest id whose time is at most ms (ms since the Unix
// epoch), whatever its shard and sequence: an id above it carries a later
// time. It is the layout's largest id when ms lies beyond the layout, and
// -1 when ms lies before its epoch.
func CeilingID(l idgen.Layout, ms int64) int64 {
	l = l.Resolved()
	shift := l.ShardBits + l.SeqBits
	t := ms - l.Epoch
	switch maxT := int64(1)<<(63-shift) - 1; {
	case t < 0:
		return -1
	case t >= maxT:
		return 1<<63 - 1
	}
	return (t+1)<<shift - 1
}

// CounterMax is the largest value of the safe generator's counter in
// layout l (its sequence's MAXVALUE): a counter there is exhausted.
func CounterMax(l idgen.Layout) int64 {
	l = l.Resolved()
	return 1<<(63-l.ShardBits) - 1
}

// Beyond is what a column holds above an id: the ids no generator can
// have made when the id is the ceiling of the clock plus the advance's
// margin.
type Beyond struct {
	Count    int64 // at most the limit passed to IDsBeyond
	Min, Max int64
}

// MaxIDUpTo is the largest id stored in column c that is at most ceiling
// (nil when none): one step backwards down the column's index, when it
// has one.
func MaxIDUpTo(ctx context.Context, q pg.Querier, c IDColumn, ceiling int64) (*int64, error) {
	var m *int64
	err := q.QueryRow(ctx, fmt.Sprintf(`SELECT max(%[1]s)::bigint FROM %[2]s%[3]s WHERE %[1]s <= $1`, c.Column, only(c), c.Table), ceiling).Scan(&m)
	return m, err
}

// IDsBeyond counts the ids stored in column c above floor (counting at
// most limit of them) and returns the least and largest. Count is 0 when
// there are none.
func IDsBeyond(ctx context.Context, q pg.Querier, c IDColumn, floor, limit int64) (Beyond, error) {
	var b Beyond
	var lo, hi *int64
	err := q.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM (SELECT FROM %[2]s%[3]s WHERE %[1]s > $1 LIMIT $2) s),
		(SELECT min(%[1]s)::bigint FROM %[2]s%[3]s WHERE %[1]s > $1), (SELECT max(%[1]s)::bigint FROM %[2]s%[3]s WHERE %[1]s > $1)`,
		c.Column, only(c), c.Table), floor, limit).Scan(&b.Count, &lo, &hi)
	if lo != nil && hi != nil {
		b.Min, b.Max = *lo, *hi
	}
	return b, err
}

// MaxGenuineID is the largest id, forged ids left out, in the columns of
// schema whose DEFAULT is its generator: the largest whose time is at most
// the host's clock plus marginMS (sql.AdvanceMarginMS; 0 when none). An
// id beyond was not handed out by a generator (docs/uniqueness.md#forged-ids):
// carrying a counter past it would burn the id space or exhaust it.
func MaxGenuineID(ctx context.Context, q pg.Querier, schema string, l idgen.Layout, marginMS int64) (int64, error) {
	var nowMS int64
	if err := q.QueryRow(ctx, `SELECT pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000)::bigint`).Scan(&nowMS); err != nil {
		return 0, err
	}
	cols, err := IDColumns(ctx, q, schema)
	if err != nil {
		return 0, err
	}
	ceiling := CeilingID(l, nowMS+marginMS)
	var out int64
	for _, c := range cols {
		m, err := MaxIDUpTo(ctx, q, c, ceiling)
		if err != nil {
			return 0, err
		}
		if m != nil {
			out = max(out, *m)
		}
	}
	return out, nil
}

// only is the ONLY of a read of c's own rows: a partitioned parent's rows
// live in its partitions.
func only(c IDColumn) string {
	if c.Partitioned {
		return ""
	}
	return "ONLY "
}

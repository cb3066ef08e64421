package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// forgedSample bounds the count of forged ids verify reads per column.
const forgedSample = 1000

// checkCounter compares the safe counter with the ids stored in the
// shard's tables on its host. The stored ids are read first: anything
// inserted meanwhile came from a counter value the later read sees.
//
// An id whose time lies beyond the host's clock plus the margin
// next_id_advance allows without force (shsql.AdvanceMarginMS) is not
// one a generator of this cluster handed out (a generator's ids follow
// its host's clock, or a counter advanced within that margin): it was
// written with an explicit id. Where the counter is behind such ids they
// are reported as forged, with where they are, never as a counter to
// advance: advancing to them would burn the id space, or exhaust it for
// good (docs/uniqueness.md#forged-ids). The repair printed for a counter
// behind the other ids never needs force, so it never takes the counter
// past the clock plus the margin.
func (v *verifier) checkCounter(ctx context.Context, t *shardTask) {
	cols := t.host.columns[t.schema]
	if !t.safe || len(cols) == 0 {
		return
	}
	if _, ok := t.host.sequences[t.schema+"."+shsql.CounterName]; !ok {
		return
	}
	l := v.m.Layout
	hostNow := v.opts.Now().Add(t.host.clockOffset)
	ceiling := shardschema.CeilingID(l, hostNow.UnixMilli()+shsql.AdvanceMarginMS)
	type colMax struct {
		col       shardschema.IDColumn
		upTo, all *int64
	}
	var maxes []colMax
	for _, c := range cols {
		upTo, err := shardschema.MaxIDUpTo(ctx, t.host.pool, c, ceiling)
		if err == nil {
			var all *int64
			if all, err = shardschema.MaxID(ctx, t.host.pool, c); err == nil {
				maxes = append(maxes, colMax{c, upTo, all})
				continue
			}
		}
		v.problem(CheckCounter, t.id, t.host.name, "read max(%s): %v", c, err)
		return
	}
	var last int64
	var called bool
	seq := pgx.Identifier{t.schema, shsql.CounterName}.Sanitize()
	if err := t.host.pool.QueryRow(ctx, "SELECT last_value, is_called FROM "+seq).Scan(&last, &called); err != nil {
		v.problem(CheckCounter, t.id, t.host.name, "read %s: %v", seq, err)
		return
	}
	next := last
	if called {
		next++
	}
	if next > shardschema.CounterMax(l) {
		// IDOfCounter would wrap into a negative id here.
		v.problem(CheckCounter, t.id, t.host.name, "counter %s is exhausted (at its maximum %d): every next_id() of the shard fails for good (an advance of an older release taken to a forged id? docs/uniqueness.md#forged-ids)", seq, last)
		return
	}
	nextID := shardschema.IDOfCounter(l, next, t.id)

	var behind *int64 // the largest id not forged that the counter would repeat
	var where shardschema.IDColumn
	for _, m := range maxes {
		if m.upTo != nil && *m.upTo >= nextID && (behind == nil || *m.upTo > *behind) {
			behind, where = m.upTo, m.col
		}
		if m.all == nil || *m.all <= ceiling || *m.all < nextID {
			continue // none forged, or the counter is past them all
		}
		b, err := shardschema.IDsBeyond(ctx, t.host.pool, m.col, max(ceiling, nextID-1), forgedSample)
		if err != nil {
			v.problem(CheckCounter, t.id, t.host.name, "read the ids of %s beyond the clock: %v", m.col, err)
			continue
		}
		count := fmt.Sprintf("%d ids in %s lie", b.Count, m.col)
		switch {
		case b.Count == 1:
			count = fmt.Sprintf("1 id in %s lies", m.col)
		case b.Count >= forgedSample:
			count = fmt.Sprintf("at least %d ids in %s lie", b.Count, m.col)
		}
		ahead := time.Duration(shardschema.UnixMilli(l, b.Max)-hostNow.UnixMilli()) * time.Millisecond
		v.problem(CheckCounter, t.id, t.host.name, "%s beyond the host's clock plus the %s next_id_advance allows (%d .. %d, the largest %s ahead): no generator of this cluster can have made them (written with an explicit id); the counter is not to be advanced to them: correct or delete the rows (SELECT * FROM %s WHERE %s > %d)",
			count, time.Duration(shsql.AdvanceMarginMS)*time.Millisecond, b.Min, b.Max, roundAhead(ahead), m.col.Table, m.col.Column, ceiling)
	}
	if behind != nil {
		v.problem(CheckCounter, t.id, t.host.name, "counter is behind stored ids: the next id would be %d but %s already holds %d (rewound or restored sequence, or a table-only restore; repair: SELECT %s(%d))",
			nextID, where, *behind, pgx.Identifier{t.schema, shsql.AdvanceName}.Sanitize(), *behind)
	}
}

// roundAhead shows a duration in the largest unit that reads well: years
// for a forged id with the largest time bits, ms for one just past the
// margin.
func roundAhead(d time.Duration) string {
	const year = 365 * 24 * time.Hour
	if d >= 2*year {
		return fmt.Sprintf("%.1f years", d.Hours()/24/365)
	}
	return d.Round(time.Second).String()
}

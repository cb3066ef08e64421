package hosts

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// advanceCounters carries the counter of every shard the map places on
// host past the bound, on the new server conn (docs/uniqueness.md#failover):
// the bound is the manager's clock now plus the margin and the old
// primary's recorded clock lead, or, when later, the time of the most
// advanced counter replicated to the new server plus the margin. Each
// advance is the generator's own next_id_advance, under its lock, which
// never moves a counter back: running it again is harmless.
func advanceCounters(ctx context.Context, conn *pgx.Conn, m *shardmgr.ShardMap, host string, opts FailoverOptions, res *FailoverResult) error {
	if m.Variant != shsql.Safe {
		return fmt.Errorf("the cluster's generator is %q, which has no counter to carry past the old primary's ids (only the safe generator's ids can be kept unique across a failover)", m.Variant)
	}
	l := m.Layout.Resolved()
	shards := m.ShardsOn(host)
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", max(opts.LockWait.Milliseconds(), 1))); err != nil {
		return err
	}
	now := opts.Now()
	boundMS := now.UnixMilli() + opts.Margin.Milliseconds() + res.RecordedLeadMS
	res.BoundSource = BoundClock
	before := make([]int64, len(shards)) // each shard's next counter value
	for i, id := range shards {
		next, err := nextCounter(ctx, conn, m.Shards[id].Schema)
		if err != nil {
			return fmt.Errorf("shard %d: %w", id, err)
		}
		before[i] = next
		// The counter replicated here is ahead of the clock bound: the old
		// primary's clock ran further ahead than the catalog recorded, and
		// what it handed out after this record lies beyond it too.
		if ms := next>>l.SeqBits + l.Epoch + opts.Margin.Milliseconds(); ms > boundMS {
			boundMS, res.BoundSource = ms, BoundReplicated
		}
	}
	res.Bound = time.UnixMilli(boundMS).UTC()
	serverNowMS := now.UnixMilli() - res.ServerBehindMS
	// Force only where the new server's clock is so far behind that the
	// bound lies beyond the hour next_id_advance allows without it: the
	// bound comes from the manager's clock, not from a stored id that
	// could be forged. The advance's ten-year limit holds even so.
	force := boundMS-serverNowMS > shsql.AdvanceMarginMS-60_000
	floor := (boundMS-l.Epoch)<<l.SeqBits | (1<<l.SeqBits - 1)
	for i, id := range shards {
		schema := m.Shards[id].Schema
		adv := pgx.Identifier{schema, shsql.AdvanceName}.Sanitize()
		start := time.Now()
		if _, err := conn.Exec(ctx, "SELECT "+adv+"($1, $2)", shardschema.IDOfCounter(l, floor, id), force); err != nil {
			if pg.IsLockTimeout(err) {
				return shardschema.GeneratorLockWait(ctx, conn, id, start) // names the sessions holding it
			}
			return fmt.Errorf("shard %d: %s: %w", id, adv, err)
		}
		after, err := nextCounter(ctx, conn, schema)
		if err != nil {
			return fmt.Errorf("shard %d: %w", id, err)
		}
		// Where the next id would have come from: the counter, or the
		// server's clock when that is later (the pull-up).
		from := max(before[i], (serverNowMS-l.Epoch)<<l.SeqBits)
		a := ShardAdvance{Shard: id, Schema: schema,
			Before: shardschema.IDOfCounter(l, from, id), After: shardschema.IDOfCounter(l, after, id),
			AdvancedMS: max(after>>l.SeqBits-from>>l.SeqBits, 0)}
		res.Shards = append(res.Shards, a)
		res.AdvancedMS = max(res.AdvancedMS, a.AdvancedMS)
	}
	return nil
}

// nextCounter is the counter value the shard's next nextval returns.
func nextCounter(ctx context.Context, conn *pgx.Conn, schema string) (int64, error) {
	seq := pgx.Identifier{schema, shsql.CounterName}.Sanitize()
	var last int64
	var called bool
	if err := conn.QueryRow(ctx, "SELECT last_value, is_called FROM "+seq).Scan(&last, &called); err != nil {
		if pg.IsUndefinedTable(err) {
			return 0, fmt.Errorf("%s is missing on the new server (not a standby of this host's database?)", seq)
		}
		return 0, fmt.Errorf("read %s: %w", seq, err)
	}
	if called {
		last++
	}
	return last, nil
}

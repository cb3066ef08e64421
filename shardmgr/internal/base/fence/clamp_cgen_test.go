package fence

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// The move's clamp holds against the C generator, which takes no advisory
// lock: while sessions draw ids as fast as they can, ClampCounter succeeds
// and returns a value no id drawn exceeds (its ALTER SEQUENCE lock stops
// every nextval, C or not, between its draw and the new MAXVALUE); later
// draws fail; unclamped, the counter goes on past every id drawn.
func TestClampCounterHoldsAgainstTheCGenerator(t *testing.T) {
	t.Parallel()
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	c := ctx(t)
	db := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	ddl, err := shsql.Render(shsql.Params{Generator: shsql.GeneratorC, Shard: 3})
	require.NoError(t, err)
	_, err = db.Exec(c, "CREATE EXTENSION IF NOT EXISTS "+shsql.ExtensionName+";\n"+ddl)
	require.NoError(t, err)
	counter := func(id int64) int64 { return id>>23<<10 | id&1023 }

	for round := range 5 {
		var stop atomic.Bool
		var g errgroup.Group
		drawn := make([][]int64, 3)
		for s := range drawn {
			g.Go(func() error {
				for !stop.Load() {
					rows, err := db.Query(c, "SELECT shard_0003.next_id() FROM generate_series(1, 50)")
					if err != nil {
						return err
					}
					ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
					var pe *pgconn.PgError
					if errors.As(err, &pe) && pe.Code == pgerrcode.SequenceGeneratorLimitExceeded {
						return nil // clamped
					}
					if err != nil {
						return err
					}
					drawn[s] = append(drawn[s], ids...)
				}
				return nil
			})
		}
		time.Sleep(100 * time.Millisecond)
		var last int64
		err := pgx.BeginFunc(c, db, func(tx pgx.Tx) error {
			var err error
			last, err = ClampCounter(c, tx, "shard_0003", 3)
			return err
		})
		require.NoError(t, err, "round %d: the clamp under concurrent C draws", round)
		time.Sleep(50 * time.Millisecond)
		stop.Store(true)
		require.NoError(t, g.Wait())
		for _, ids := range drawn {
			for _, id := range ids {
				require.LessOrEqual(t, counter(id), last, "round %d: an id drawn beyond the clamp", round)
			}
		}
		_, err = db.Exec(c, "SELECT shard_0003.next_id()")
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe) && pe.Code == pgerrcode.SequenceGeneratorLimitExceeded, "clamped: %v", err)
		require.NoError(t, pgx.BeginFunc(c, db, func(tx pgx.Tx) error {
			return UnclampCounter(c, tx, "shard_0003", 1<<50-1)
		}))
		var next int64
		require.NoError(t, db.QueryRow(c, "SELECT shard_0003.next_id()").Scan(&next))
		require.Greater(t, counter(next), last)
	}
}

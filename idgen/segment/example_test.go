package segment_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/migrations"
)

// Two source databases serve the tag "order": the first hands out the
// even ids, the second the odd ones, so either may be down.
func Example() {
	ctx := context.Background()
	sources, cleanup := localSources(2) // your databases' DSNs, in a fixed order
	defer cleanup()

	var pools []*pgxpool.Pool
	for _, dsn := range sources {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			panic(err)
		}
		defer pool.Close()
		pools = append(pools, pool)
	}
	alloc, err := segment.New(pools, map[string]segment.TagConfig{
		"order": {MinStep: 500, MaxStep: 20_000, Format: "ORD-{date}-{seq:10}"},
	},
		// Creates shardid.segments in each source before its first use.
		segment.WithPrepare(func(ctx context.Context, i int) error {
			return migrations.Up(ctx, sources[i], migrations.Segment)
		}),
		segment.WithClock(func() time.Time { return time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC) }),
	)
	if err != nil {
		panic(err)
	}
	defer alloc.Close()

	order := alloc.Tag("order")
	for range 3 {
		id, err := order.Next(ctx) // from memory; the database is asked once per segment
		if err != nil {
			panic(err) // errors.Is(err, segment.ErrUnavailable): no source can serve
		}
		text := order.Format().Render(id, alloc.Now(), "")
		parts, _ := order.Format().Parse(text)
		fmt.Println(id, text, parts.Seq, parts.Date.Format(time.DateOnly))
	}
	// Output:
	// 3 ORD-20261129-0000000003 3 2026-11-29
	// 5 ORD-20261129-0000000005 5 2026-11-29
	// 7 ORD-20261129-0000000007 7 2026-11-29
}

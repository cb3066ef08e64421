package snowflake_test

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/migrations"
)

// Decompose reads an id of any layout: here Discord's example, which uses
// Twitter's split with its own epoch.
func ExampleLayout_Decompose() {
	discord := snowflake.Twitter
	discord.Epoch = snowflake.DiscordEpoch
	p, err := discord.Decompose(175928847299117063)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Time.Format("2006-01-02 15:04:05.000"), p.Datacenter, p.Worker, p.Seq)
	// Output: 2016-04-30 11:18:25.796 1 0 7
}

// A generator for a fixed node, for a process that owns its worker id.
func ExampleNew() {
	g, err := snowflake.New(snowflake.Settings{Datacenter: 1, Worker: 7})
	if err != nil {
		panic(err)
	}
	id, err := g.NextID()
	if err != nil {
		panic(err)
	}
	p, _ := g.Layout().Decompose(id)
	fmt.Println(p.Datacenter, p.Worker)
	// Output: 1 7
}

// A generator whose worker id is leased from PostgreSQL.
func ExampleStart() {
	ctx := context.Background()
	dsn := os.Getenv("SNOWFLAKE_LEASES") // e.g. postgres://postgres@127.0.0.1:5433/idleases
	if dsn == "" {
		return
	}
	if err := migrations.Up(ctx, dsn, migrations.Snowflake); err != nil {
		panic(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	g, err := snowflake.Start(ctx, pool, snowflake.Settings{Datacenter: 1})
	if err != nil {
		panic(err)
	}
	defer g.Close(ctx)
	lease, _ := g.Lease()
	id, err := g.NextID()
	fmt.Println(lease.Worker, lease.Token, id, err)
}

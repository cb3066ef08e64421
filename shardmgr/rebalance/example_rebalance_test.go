package rebalance_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

// After adding a host to the cluster file, an operator's tool plans the
// moves, then runs them; running it again after an interruption resumes.
func ExampleApply() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	c, err := cluster.Open(ctx, cfg) // the file's hosts must be the catalog's: shardid init applies them
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	plan, err := rebalance.PlanRebalance(ctx, c, rebalance.PlanOptions{By: rebalance.ByCount})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range plan.Moves {
		fmt.Printf("shard %d: %s -> %s (%d bytes)\n", m.Shard, m.From, m.To, m.Bytes)
	}
	migrations, err := migrate.LoadMigrationDir("migrations")
	if err != nil {
		log.Fatal(err)
	}
	res, err := rebalance.Apply(ctx, c, rebalance.ApplyOptions{
		Parallel: 4,
		Move: rebalance.MoveOptions{
			Migrations: migrations,
			Progress: func(p rebalance.MoveProgress) {
				fmt.Fprintf(os.Stderr, "shard %d: %s\n", p.Shard, p.Phase)
			},
		},
	})
	var failed *shardmgr.ShardErrors
	if errors.As(err, &failed) {
		log.Printf("%d moves failed; their shards still serve from their old hosts", len(failed.Errs))
	} else if err != nil {
		log.Fatal(err)
	}
	for _, m := range res.Moves {
		fmt.Printf("shard %d on %s: writes refused for %s\n", m.Shard, m.To, m.Refused)
	}
}

// One shard, offline (fence, COPY, flip), keeping no old copy.
func ExampleMoveShard() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	c, err := cluster.Open(ctx, cfg) // the file's hosts must be the catalog's: shardid init applies them
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := rebalance.MoveShard(ctx, c, 5, "pg4", rebalance.MoveOptions{Mode: rebalance.MoveOffline, Keep: new(time.Duration)})
	if errors.Is(err, rebalance.ErrMoveOpen) {
		log.Fatal("shard 5 is already moving elsewhere: shardid rebalance abort --shard 5")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d rows moved to %s at generation %d\n", res.Rows, res.To, res.Generation)
}

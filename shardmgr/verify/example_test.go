package verify_test

import (
	"github.com/shardid/shardid/shardmgr/cluster"

	"context"
	"fmt"
	"log"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/verify"
)

// Verify scans every host and reports each problem with its check, shard
// and host.
func ExampleVerify() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	c, err := cluster.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	rep, err := verify.Verify(ctx, c, verify.Options{Deep: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range rep.Problems {
		fmt.Println(p) // e.g. "placement shard 5 on pg2: stray copy of shard 5 (the catalog places it on pg1) ..."
	}
	fmt.Println("unique ids guaranteed:", rep.OK)
}

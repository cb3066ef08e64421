package cluster_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/verify"
)

// One handle per command: opened once, passed to every operator call,
// closed once.
func ExampleOpen() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	c, err := cluster.Open(ctx, cfg, cluster.WithConnsPerServer(32), cluster.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err) // the cluster file is checked here, once
	}
	defer c.Close()
	if _, err := install.Init(ctx, c, install.InitOptions{}); err != nil {
		log.Fatal(err)
	}
	rep, err := verify.Verify(ctx, c, verify.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.OK)
}

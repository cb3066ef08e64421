package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
)

// addClusterConfigFlag adds --config (default shardid.yaml, or
// SHARDID_CONFIG) to a cluster command and returns where its value lands.
func addClusterConfigFlag(cmd *cobra.Command) *string {
	def := shardmgr.DefaultConfigPath
	if env := os.Getenv("SHARDID_CONFIG"); env != "" {
		def = env
	}
	path := new(string)
	cmd.Flags().StringVar(path, "config", def, "cluster file (env SHARDID_CONFIG)")
	return path
}

// openCluster reads the cluster file and opens the operator's handle on
// it (cluster.Open checks the file: one clear error when it is bad): once
// per command, which passes it on and closes it.
func openCluster(ctx context.Context, path string) (*cluster.Cluster, error) {
	cfg, err := shardmgr.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	return cluster.Open(ctx, cfg)
}

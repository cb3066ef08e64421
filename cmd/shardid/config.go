package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr"
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

// loadCluster reads and checks the cluster file: one clear error when it
// is bad.
func loadCluster(path string) (*shardmgr.Config, error) {
	cfg, err := shardmgr.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	return cfg, nil
}

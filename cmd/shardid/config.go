package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
)

// connsPerServerFlag bounds the connections one command holds on one
// PostgreSQL server: the handle's budget (cluster.WithConnsPerServer).
const connsPerServerFlag = "conns-per-server"

// addClusterFlags adds the two flags of a command that opens the cluster
// handle (openCluster): --config (default shardid.yaml, or SHARDID_CONFIG)
// and --conns-per-server. It returns where --config lands.
func addClusterFlags(cmd *cobra.Command) *string {
	cmd.Flags().Int(connsPerServerFlag, cluster.DefaultConnsPerServer,
		fmt.Sprintf("most connections this command holds on one PostgreSQL server (host:port), all its databases together; 1 to %d", cluster.MaxConnsPerServer))
	return addConfigPathFlag(cmd)
}

// addConfigPathFlag adds --config alone, for a command that reads the
// cluster file without opening the handle (serve).
func addConfigPathFlag(cmd *cobra.Command) *string {
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
// per command, which passes it on and closes it. --conns-per-server is
// checked first, before the file is read.
func openCluster(cmd *cobra.Command, path string) (*cluster.Cluster, error) {
	opts, err := clusterOptions(cmd)
	if err != nil {
		return nil, err
	}
	cfg, err := shardmgr.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	return cluster.Open(cmd.Context(), cfg, opts...)
}

// clusterOptions are the handle options a command's flags ask for: the
// same for every handle the command opens (host drain opens one on the
// cluster as it will be once the host is marked).
func clusterOptions(cmd *cobra.Command) ([]cluster.Option, error) {
	conns, err := cmd.Flags().GetInt(connsPerServerFlag)
	if err != nil {
		return nil, err
	}
	if conns < 1 || conns > cluster.MaxConnsPerServer {
		return nil, usagef("--%s %d: want 1 to %d", connsPerServerFlag, conns, cluster.MaxConnsPerServer)
	}
	// The commands report what they did themselves: the handle's own
	// lines (retried connects, the phases of work given no Logger) are
	// not the user's.
	return []cluster.Option{cluster.WithConnsPerServer(conns), cluster.WithLogger(slog.New(slog.DiscardHandler))}, nil
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/app/demo"
)

func newDemoCmd() *cobra.Command {
	var opts demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start three local PostgreSQL hosts, spread 64 shards, insert through the router, verify, clean up",
		Long: `The shard manager's main job on an embedded default: needs no arguments and
nothing running. It starts three local PostgreSQL servers from the system's
binaries (the hosts), writes a cluster file for them, runs init (64 logical
shards in balanced ranges, a generator in each), creates a table whose id
column uses the shard's generator as DEFAULT, inserts rows through the router
from several goroutines, prints sample ids decoded, ids per second and the
duplicates found (0), runs verify --deep, and removes everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Hosts < 0 || opts.Shards < 0 || opts.Sessions < 0 || opts.Rows < 0 {
				return usagef("--hosts, --shard-count, --workers and --rows must not be negative")
			}
			if opts.Shards > 8192 {
				return usagef("--shard-count must be at most 8192")
			}
			_, err := demo.Run(cmd.Context(), cmd.OutOrStdout(), opts)
			return err
		},
	}
	cmd.Flags().IntVar(&opts.Hosts, "hosts", 3, "local PostgreSQL servers to start")
	cmd.Flags().IntVar(&opts.Shards, "shard-count", 64, "logical shards to spread over them")
	cmd.Flags().IntVar(&opts.Sessions, "workers", 8, "goroutines inserting through the router")
	deprecatedAlias(cmd, cmd.Flags(), "shard-count", "shards")
	deprecatedAlias(cmd, cmd.Flags(), "workers", "sessions")
	cmd.Flags().IntVar(&opts.Rows, "rows", 200_000, "rows to insert in all")
	return cmd
}

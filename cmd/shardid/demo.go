package main

import (
	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/demo"
)

func init() { commands = append(commands, newDemoCmd) }

func newDemoCmd() *cobra.Command {
	var opts demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start local PostgreSQL, install shards, insert from many sessions, check every id, clean up",
		Long: `The main job on an embedded default: needs no arguments and nothing running.
It starts a local PostgreSQL server from the system's binaries, installs the
safe generator in a few logical shards, creates a table whose id column uses it
as DEFAULT, inserts rows from several concurrent sessions, prints sample ids
decoded, ids per second and the duplicates found (0), and removes everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Shards < 0 || opts.Sessions < 0 || opts.Rows < 0 {
				return usagef("--shards, --sessions and --rows must not be negative")
			}
			_, err := demo.Run(cmd.Context(), cmd.OutOrStdout(), opts)
			return err
		},
	}
	cmd.Flags().IntVar(&opts.Shards, "shards", 4, "logical shards to install")
	cmd.Flags().IntVar(&opts.Sessions, "sessions", 8, "concurrent sessions inserting")
	cmd.Flags().IntVar(&opts.Rows, "rows", 200_000, "rows to insert in all")
	return cmd
}

package main

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/rebalance"
)

func init() { commands = append(commands, newShardCmd) }

func newShardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "Act on one logical shard",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newShardMoveCmd())
	return cmd
}

func newShardMoveCmd() *cobra.Command {
	var (
		to     string
		asJSON bool
		mf     moveFlags
	)
	cmd := &cobra.Command{
		Use:   "move N --to HOST [--mode online|offline|auto] [--dir DIR] [--keep DURATION] [--json]",
		Short: "Move logical shard N to HOST (online by default)",
		Long: `Moves one logical shard, as 'shardid rebalance apply' moves each shard of
a plan: journaled, resumable (run the same command again), rolled back by
'shardid rebalance abort --shard N'. Online, writes are refused only for the
cut-over; offline (for hosts without logical replication, or tables without a
primary key), for the whole copy. --json prints the move:
{"id":N,"shard":N,"from":"pg1","to":"pg4","mode":"online","phase":"cleaned","rows":N,
"bytes":N,"refused_ms":N,"elapsed_ms":N,"generation":N,"retired_schema":"..."}`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterConfigFlag(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the host to move the shard to (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the move as JSON")
	mf.add(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		shard, err := strconv.Atoi(args[0])
		if err != nil || shard < 0 {
			return usagef("shard %q: want a shard number", args[0])
		}
		if to == "" {
			return usagef("--to is required")
		}
		mo, err := mf.options(cmd, *configPath)
		if err != nil {
			return err
		}
		cfg, err := loadCluster(*configPath)
		if err != nil {
			return err
		}
		bars := newMoveProgress(cmd.ErrOrStderr())
		mo.Progress = bars.Update
		res, err := rebalance.MoveShard(cmd.Context(), cfg, shard, to, mo)
		bars.Done()
		err = reportPreflight(cmd.ErrOrStderr(), err)
		if res != nil {
			if asJSON {
				if jerr := writeJSON(cmd.OutOrStdout(), res); jerr != nil && err == nil {
					err = jerr
				}
			} else {
				printHostChanges(cmd.OutOrStdout(), res.HostChanges)
				printMoves(cmd.OutOrStdout(), []*rebalance.MoveResult{res})
			}
		}
		return err
	}
	return cmd
}

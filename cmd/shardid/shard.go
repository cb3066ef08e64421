package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

func newShardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "Act on one logical shard",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newShardMoveCmd(), newShardWhereCmd())
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
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		bars := newMoveProgress(cmd.ErrOrStderr())
		mo.Progress = bars.Update
		res, err := rebalance.MoveShard(cmd.Context(), c, shard, to, mo)
		bars.Done()
		err = reportPreflight(cmd.ErrOrStderr(), err)
		if res != nil {
			if asJSON {
				if jerr := writeJSON(cmd.OutOrStdout(), res); jerr != nil && err == nil {
					err = jerr
				}
			} else {
				printMoves(cmd.OutOrStdout(), []*rebalance.MoveResult{res})
			}
		}
		return err
	}
	return cmd
}

func newShardWhereCmd() *cobra.Command {
	var asJSON, dsnOnly bool
	cmd := &cobra.Command{
		Use:   "where N [--json | --dsn]",
		Short: "Say where logical shard N lives: host, DSN, schema, state",
		Long: `Reads the catalog and prints logical shard N's host, the host's DSN from the
cluster file (without a password: ${VAR} references stay as written), its
schema and its state, and the target of a move in progress. --dsn prints the
DSN alone, for psql "$(shardid shard where 5 --dsn)"; --json prints
{"shard":5,"schema":"shard_0005","host":"pg1","dsn":"postgres://...","state":"active",
"generation":N} plus "moving_to":"pg4" during a move.`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterConfigFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the location as JSON")
	cmd.Flags().BoolVar(&dsnOnly, "dsn", false, "print only the host's DSN (without a password)")
	cmd.MarkFlagsMutuallyExclusive("json", "dsn")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		shard, err := strconv.Atoi(args[0])
		if err != nil || shard < 0 {
			return usagef("shard %q: want a shard number", args[0])
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		loc, err := install.WhereIs(cmd.Context(), c, shard)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		switch {
		case asJSON:
			return writeJSON(out, loc)
		case dsnOnly:
			_, err = fmt.Fprintln(out, loc.DSN)
			return err
		}
		fmt.Fprintf(out, "shard %d: schema %s on %s, %s (generation %d)\n", loc.Shard, loc.Schema, loc.Host, loc.State, loc.Generation)
		if loc.MovingTo != "" {
			fmt.Fprintf(out, "moving to %s\n", loc.MovingTo)
		}
		_, err = fmt.Fprintf(out, "dsn: %s\n", loc.DSN)
		return err
	}
	return cmd
}

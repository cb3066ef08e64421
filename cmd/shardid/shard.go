package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/rebalance"
	"github.com/shardid/shardid/shardmgr/repair"
)

func newShardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "Act on one logical shard",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newShardMoveCmd(), newShardWhereCmd(), newShardDropStrayCmd())
	return cmd
}

func newShardMoveCmd() *cobra.Command {
	var (
		to     string
		asJSON bool
		dryRun bool
		mf     moveFlags
	)
	cmd := &cobra.Command{
		Use:   "move N --to HOST [--mode online|offline|auto] [--dir DIR] [--keep DURATION] [--dry-run] [--json]",
		Short: "Move logical shard N to HOST (online by default)",
		Long: `Moves one logical shard, as 'shardid rebalance apply' moves each shard of
a plan: journaled, resumable (run the same command again), rolled back by
'shardid rebalance abort --shard N'. Online, writes are refused only for the
cut-over; offline (for hosts without logical replication, or tables without a
primary key), for the whole copy. --json prints the move:
{"id":N,"shard":N,"from":"pg1","to":"pg4","mode":"online","phase":"cleaned","rows":N,
"bytes":N,"refused_ms":N,"elapsed_ms":N,"generation":N,"retired_schema":"..."}.
--dry-run runs the checks and the preflight only, and prints the phases the
move would pass, the fenced ones (writes refused) and the point of no return
(from there the move is finished, never aborted); nothing is changed.`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the host to move the shard to (required)")
	_ = cmd.RegisterFlagCompletionFunc("to", hostNames(configPath))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the move as JSON")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check and print the phases the move would pass, the point of no return marked; change nothing")
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
		if dryRun {
			d, err := rebalance.DryRunMove(cmd.Context(), c, shard, to, mo)
			if err != nil {
				return reportPreflight(cmd.ErrOrStderr(), err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			printDryRun(cmd.OutOrStdout(), d)
			return nil
		}
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
		Use:   "where N [--json | --dsn-only]",
		Short: "Say where logical shard N lives: host, DSN, schema, state",
		Long: `Reads the catalog and prints logical shard N's host, the host's DSN from the
cluster file (without a password: ${VAR} references stay as written), its
schema and its state, and the target of a move in progress. --dsn-only prints
the DSN alone, for psql "$(shardid shard where 5 --dsn-only)"; --json prints
{"shard":5,"schema":"shard_0005","host":"pg1","dsn":"postgres://...","state":"active",
"generation":N} plus "moving_to":"pg4" during a move.`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the location as JSON")
	cmd.Flags().BoolVar(&dsnOnly, "dsn-only", false, "print only the host's DSN (without a password)")
	deprecatedAlias(cmd, cmd.Flags(), "dsn-only", "dsn")
	cmd.MarkFlagsMutuallyExclusive("json", "dsn-only")
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

func newShardDropStrayCmd() *cobra.Command {
	var (
		host     string
		asJSON   bool
		lockWait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "drop-stray N --host HOST [--lock-wait DURATION] [--json]",
		Short: "Drop a stray copy of logical shard N on HOST (one the catalog does not place there)",
		Long: `Drops HOST's copy of logical shard N when the catalog places the shard on
another host and the copy is neither a move's nor a retired copy: the stray
copy an init against a mistyped or empty catalog leaves (shardid verify names
it). It first compares the copy with the live one table by table, by primary
key, and refuses, naming each table and how many of its rows the live copy
lacks, when there is any such row (a table without a primary key counts all
its rows); nothing is changed then. The stray's tables stay locked from the
comparison to the drop; each lock waits at most --lock-wait. --json prints
{"shard":N,"host":"pg2","schema":"shard_0001","live_host":"pg1","tables":N,"rows":N}.`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().StringVar(&host, "host", "", "the host whose stray copy to drop (required)")
	_ = cmd.RegisterFlagCompletionFunc("host", hostNames(configPath))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was dropped as JSON")
	cmd.Flags().DurationVar(&lockWait, "lock-wait", repair.DefaultStrayLockWait, "how long each lock may be waited for")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		shard, err := strconv.Atoi(args[0])
		if err != nil || shard < 0 {
			return usagef("shard %q: want a shard number", args[0])
		}
		if host == "" {
			return usagef("--host is required")
		}
		if lockWait <= 0 {
			return usagef("--lock-wait must be positive")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		d, err := repair.DropStray(cmd.Context(), c, shard, host, lockWait)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), d)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "dropped stray copy %s of shard %d on %s (%d tables, %d rows, each also in the live copy on %s)\n",
			d.Schema, d.Shard, d.Host, d.Tables, d.Rows, d.LiveHost)
		return err
	}
	return cmd
}

// printDryRun prints a move's dry run: the move, its preflight and its
// phases, the fenced ones and the point of no return marked.
func printDryRun(w io.Writer, d *rebalance.MoveDryRun) {
	fmt.Fprintf(w, "dry run: shard %d from %s to %s, %s", d.Shard, d.From, d.To, d.Mode)
	if d.ModeReason != "" {
		fmt.Fprintf(w, " (%s)", d.ModeReason)
	}
	if d.Resumes != 0 {
		fmt.Fprintf(w, ", resuming move %d", d.Resumes)
	}
	fmt.Fprintln(w, "; nothing was changed")
	printPreflight(w, d.Preflight)
	for i, p := range d.Phases {
		var notes []string
		if p.Done {
			notes = append(notes, "done")
		}
		if p.Fenced {
			notes = append(notes, "writes refused")
		}
		if p.PointOfNoReturn {
			notes = append(notes, "POINT OF NO RETURN: from here the move is finished, never aborted")
		}
		fmt.Fprintf(w, "%2d. %-9s %s\n", i+1, p.Phase, strings.Join(notes, "; "))
	}
}

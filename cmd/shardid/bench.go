package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/app/genbench"
	"github.com/shardid/shardid/internal/pgsession"
)

func newBenchCmd() *cobra.Command {
	var (
		dsn    string
		opts   genbench.Options
		asJSON bool
		svg    string
	)
	cmd := &cobra.Command{
		Use:   "bench [--dsn DSN] [--ids N] [--rounds R] [--workers 8,16] [--insert-for D] [--json] [--svg FILE]",
		Short: "Measure the safe generator against Instagram's function, nextval and bigserial",
		Long: `Runs each case in one session, round after round, on one server and prints
the medians side by side with the ratios the project's goals are stated in.
Then, for each --workers count, that many sessions make single-row INSERTs
(one transaction each, as pgbench does) for --insert-for into the bigserial
table and into the safe generator's, alternating, with the simple protocol
(pgbench's default) and with prepared statements (pgx's default).
Without --dsn it starts a local PostgreSQL server and removes it afterwards;
with --dsn it uses (and drops) schemas shardid_bench, shard_0001 and
shard_0002 of that database: point it at a scratch database.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if opts.IDs < 1 || opts.Rounds < 1 || opts.InsertFor <= 0 {
				return usagef("--ids, --rounds and --insert-for must be positive")
			}
			for _, c := range opts.Clients {
				if c < 1 {
					return usagef("--workers must list positive numbers of sessions")
				}
			}
			if svg != "" {
				if err := chartsFor(svg); err != nil {
					return err
				}
			}
			if dsn == "" {
				scratch, stop, err := genbench.Scratch(ctx)
				if err != nil {
					return err
				}
				defer stop()
				dsn = scratch
			}
			conn, err := pgsession.Connect(ctx, dsn)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			bar := newProgress(os.Stderr)
			bar.transient = true
			opts.Progress = func(round int, name string) {
				bar.set("rounds", "round", int64(round), int64(opts.Rounds), fmt.Sprintf("%d/%d: %s", round, opts.Rounds, name))
			}
			res, err := genbench.Run(ctx, conn, opts)
			bar.Done()
			if err != nil {
				return err
			}
			if svg != "" {
				if err := writeBenchSVG(svg, res); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "PostgreSQL %s, %d ids per case, median of %d rounds, one session, %s\n\n", res.Server, res.IDs, res.Rounds, res.Machine)
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "case\ttotal\tper id\n")
			for _, c := range res.Cases {
				fmt.Fprintf(w, "%s\t%.0f ms\t%.0f ns\n", c.Name, float64(c.Median.Microseconds())/1000, float64(c.PerID(res.IDs)))
			}
			w.Flush()
			printBenchGoals(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&dsn, "dsn", "", "scratch database to measure on (default: a local server started for the run)")
	cmd.Flags().IntVar(&opts.IDs, "ids", 1_000_000, "ids per case")
	cmd.Flags().IntVar(&opts.Rounds, "rounds", 3, "rounds (each case reports its median)")
	cmd.Flags().IntSliceVar(&opts.Clients, "workers", []int{8, 16}, "sessions of the single-row INSERT cases, one case per number (empty: skip them)")
	deprecatedAlias(cmd, cmd.Flags(), "workers", "clients")
	cmd.Flags().DurationVar(&opts.InsertFor, "insert-for", 5*time.Second, "how long each single-row INSERT case runs per round")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.AddCommand(newBenchSchemesCmd())
	cmd.Flags().StringVar(&svg, "svg", "", "also draw the figures as charts into this SVG file (a build with -tags charts)")
	return cmd
}

// median of xs (which it leaves unsorted).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

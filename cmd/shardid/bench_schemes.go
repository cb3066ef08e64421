package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/schemebench"
)

func newBenchSchemesCmd() *cobra.Command {
	var (
		dsn    string
		opts   schemebench.Options
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "schemes [--dsn DSN] [--rows N] [--rounds R] [--go-duration D] [--json]",
		Short: "Measure the id schemes of docs/schemes.md side by side",
		Long: `Measures, round after round on one server: ids per second made inside
PostgreSQL (safe generator, Instagram's function, uuidv7(), gen_random_uuid(),
nextval), ids per second in Go (snowflake, segment allocator) and bulk INSERTs
of --rows rows keyed by bigserial, a time-ordered bigint, UUIDv7 and random
UUIDv4 with the size of each primary key. Each case reports its median.
Without --dsn it starts a local PostgreSQL server; with --dsn it uses (and
drops) schemas schemebench, shard_0001 and shard_0002: a scratch database.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if opts.Rows < 1 || opts.Rounds < 1 || opts.GoDuration <= 0 || opts.Goroutines < 1 {
				return usagef("--rows, --rounds, --go-duration and --goroutines must be positive")
			}
			if dsn == "" {
				server, err := localpg.Start(ctx, localpg.Options{})
				if err != nil {
					return err
				}
				defer localpg.RemoveTemplates()
				defer server.Stop()
				if dsn, err = server.CreateDatabase(ctx, "bench"); err != nil {
					return err
				}
			}
			if term.IsTerminal(int(os.Stderr.Fd())) {
				opts.Progress = func(round int, name string) {
					fmt.Fprintf(os.Stderr, "\rround %d/%d: %-50s", round, opts.Rounds, name)
				}
			}
			res, err := schemebench.Run(ctx, dsn, opts)
			if opts.Progress != nil {
				fmt.Fprint(os.Stderr, "\r\033[K")
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "PostgreSQL %s, %d rows per case, median of %d rounds, Go cases on %d goroutines\n\n", res.Server, res.Rows, res.Rounds, res.Goroutines)
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "made inside PostgreSQL\tids/s\tper id\n")
			for _, r := range res.InDB {
				fmt.Fprintf(w, "%s\t%.0f\t%.0f ns\n", r.Name, r.IDsPerSec, 1e9/r.IDsPerSec)
			}
			fmt.Fprintf(w, "\t\t\nmade in Go\tids/s\tper id\n")
			for _, r := range res.InGo {
				fmt.Fprintf(w, "%s\t%.0f\t%.0f ns\n", r.Name, r.IDsPerSec, 1e9/r.IDsPerSec)
			}
			fmt.Fprintf(w, "\t\t\t\t\nbulk INSERT, key\ttime\trows/s\tprimary key\ttable\n")
			for _, tb := range res.Tables {
				fmt.Fprintf(w, "%s\t%s\t%.0f\t%.1f MiB\t%.1f MiB\n", tb.Name, tb.Median.Round(time.Millisecond), tb.IDsPerSec,
					float64(tb.IndexBytes)/(1<<20), float64(tb.TableBytes)/(1<<20))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&dsn, "dsn", "", "scratch database to measure on (default: a local server started for the run)")
	cmd.Flags().IntVar(&opts.Rows, "rows", 1_000_000, "ids per PostgreSQL case and rows per INSERT")
	cmd.Flags().IntVar(&opts.Rounds, "rounds", 3, "rounds (each case reports its median)")
	cmd.Flags().DurationVar(&opts.GoDuration, "go-duration", time.Second, "how long each Go case runs per round")
	cmd.Flags().IntVar(&opts.Goroutines, "goroutines", 2, "goroutines of each Go case")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/app/genbench"
	"github.com/shardid/shardid/internal/app/schemebench"
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
drops) schemas schemebench, shard_0001 and shard_0002: a scratch database.

It takes a while: about 3 minutes with the defaults on an idle 2-vCPU
machine, and a run on a busy one took 24 (the bulk INSERTs of 1,000,000 rows
dominate); --rows 100000 --rounds 1 takes a tenth of that. Progress goes to
stderr: a bar with the step and the case on a terminal, else a line per step.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if opts.Rows < 1 || opts.Rounds < 1 || opts.GoDuration <= 0 || opts.Goroutines < 1 {
				return usagef("--rows, --rounds, --go-duration and --workers must be positive")
			}
			if dsn == "" {
				scratch, stop, err := genbench.Scratch(ctx)
				if err != nil {
					return err
				}
				defer stop()
				dsn = scratch
			}
			progress := newSchemesProgress(cmd.ErrOrStderr(), isTerminal(cmd.ErrOrStderr()))
			opts.Progress = progress.step
			res, err := schemebench.Run(ctx, dsn, opts)
			progress.done(err)
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
	cmd.Flags().IntVar(&opts.Goroutines, "workers", 2, "goroutines of each Go case")
	deprecatedAlias(cmd, cmd.Flags(), "workers", "goroutines")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// schemesProgress shows where a bench schemes run stands: a bar on a
// terminal, else a line per step (a run takes minutes; a script or a log
// should still see it move).
type schemesProgress struct {
	w     io.Writer
	bar   *progress // nil: lines
	start time.Time
}

func newSchemesProgress(w io.Writer, draw bool) *schemesProgress {
	p := &schemesProgress{w: w, start: time.Now()}
	if draw {
		p.bar = newProgressOn(w, true)
		p.bar.transient = true
	}
	return p
}

func (p *schemesProgress) step(s schemebench.Step) {
	where := s.Case
	if s.Round > 0 {
		where = fmt.Sprintf("round %d/%d: %s", s.Round, s.Rounds, s.Case)
	}
	spent := time.Since(p.start).Round(time.Second)
	if p.bar != nil {
		p.bar.set("schemes", "bench schemes", int64(s.Done), int64(s.Total), fmt.Sprintf("%d/%d %s (%s)", s.Done, s.Total, where, spent))
		return
	}
	fmt.Fprintf(p.w, "bench schemes: [%d/%d] %s (%s so far)\n", s.Done+1, s.Total, where, spent)
}

// done ends the bar, or prints the last line.
func (p *schemesProgress) done(err error) {
	if p.bar != nil {
		p.bar.Done()
		return
	}
	if err == nil {
		fmt.Fprintf(p.w, "bench schemes: done in %s\n", time.Since(p.start).Round(time.Second))
	}
}

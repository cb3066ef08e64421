package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/verify"
)

func newVerifyCmd() *cobra.Command {
	var (
		asJSON bool
		opts   verify.Options
	)
	cmd := &cobra.Command{
		Use:   "verify [--config FILE] [--json] [--deep]",
		Short: "Prove the cluster can only produce unique ids; exit 1 when any check fails",
		Long: `Scans every host, not only what the catalog names, and checks: each shard on
exactly one host and the catalog and hosts agree; every generator present, of
the expected variant, returning ids with its own shard and the cluster's epoch;
sequence settings that could repeat ids (CACHE > 1, CYCLE, a counter behind ids
already stored); leaked generator locks; host clocks against the manager and
each other; a live probe drawing ids concurrently from every shard. --deep also
reads every id stored in a column whose DEFAULT is a shard generator: each must
decode to its shard and none may appear twice.

Each problem names its check, shard, host and detail; a line counts the shards
by the generator they run (plpgsql, c: the shardid extension's, instagram).
--json prints {"ok":bool,"problems":[{"check":"...","shard":N,"host":"...",
"detail":"..."}],"generators":[{"kind":"plpgsql","count":N,"shards":"0-5"}]}.`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&opts.Deep, "deep", false, "also check every stored id")
	cmd.Flags().DurationVar(&opts.MaxClockSkew, "max-clock-skew", time.Second, "largest tolerated clock difference")
	cmd.Flags().IntVar(&opts.ProbeIDs, "probe-ids", 16, "ids the live probe draws from every shard")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if opts.MaxClockSkew <= 0 || opts.ProbeIDs < 1 {
			return usagef("--max-clock-skew and --probe-ids must be positive")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		rep, err := verify.Verify(cmd.Context(), c, opts)
		if err != nil {
			return err
		}
		if asJSON {
			if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
		} else {
			printVerify(cmd.OutOrStdout(), rep)
		}
		if !rep.OK {
			return exitError{code: 1}
		}
		return nil
	}
	return cmd
}

func printVerify(w io.Writer, rep *verify.Report) {
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "FAIL %s\n", withFix(p))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "NOTE %s\n", withFix(n))
	}
	if len(rep.Generators) > 0 { // which generator each shard runs
		kinds := make([]string, len(rep.Generators))
		for i, g := range rep.Generators {
			kinds[i] = fmt.Sprintf("%s %d (shards %s)", g.Kind, g.Count, g.Shards)
		}
		fmt.Fprintf(w, "generators: %s\n", strings.Join(kinds, ", "))
	}
	summary := fmt.Sprintf("%d shards on %d hosts, %d checks, %d probe ids, %.2fs", rep.Shards, rep.Hosts, len(rep.Checks), rep.ProbeIDs, rep.Elapsed.Seconds())
	if rep.OK {
		fmt.Fprintf(w, "verify: ok: %s\n", summary)
		return
	}
	fmt.Fprintf(w, "verify: %d %s: %s\n", len(rep.Problems), plural(len(rep.Problems), "problem", "problems"), summary)
}

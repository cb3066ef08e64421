package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/hosts"
)

func newHostFailoverCmd() *cobra.Command {
	var (
		asJSON bool
		opts   hosts.FailoverOptions
	)
	cmd := &cobra.Command{
		Use:   "failover NAME --to-dsn DSN [--new-server] [--margin DUR] [--config FILE] [--json]",
		Short: "Point a host at its promoted standby, first carrying every shard's counter past the old primary's ids",
		Long: `After the host's primary is lost and its streaming standby promoted: checks
that the server at --to-dsn is that standby, promoted (the system identifier init
recorded, out of recovery, a newer timeline, its database recording this
cluster and host) and that no move of the host's shards is unfinished; then
advances every shard's counter on it past the last time the old primary can
have put into an id (this manager's clock now, plus --margin and the lead of
the old primary's clock the catalog recorded, or a replicated counter if
later), and only then records the new DSN in the catalog (routers follow at
their next refresh) and in the cluster file. A refusal changes nothing. The
old primary must stay down. Run it again after a failure: advances never move
a counter back. docs/operations.md#failover, docs/uniqueness.md#failover.

--new-server: the host's database was restored (pg_dump, pg_restore) onto
another server, with a system identifier of its own. Instead of the standby's
checks: the server at --to-dsn is out of recovery, its system identifier is not
the recorded one, its database records this cluster and host, and the server
at the host's old DSN does not answer or is in recovery (refused while it
still accepts writes: two primaries). The counters are advanced past the same
bound (the copy may lag what the old server handed out); the new server's
identity is recorded with the DSN. docs/operations.md#a-hosts-database-restored-onto-another-server.

--json prints
{"host":"pg1","dsn":"...","system_identifier":"...","timeline":N,
 "recorded_timeline":N,"bound":"RFC 3339","bound_source":"clock|replicated-counter",
 "margin_ms":N,"recorded_lead_ms":N,"server_behind_ms":N,"advanced_ms":N,
 "shards":[{"shard":N,"schema":"shard_0000","before":ID,"after":ID,"advanced_ms":N}],
 "generation":N,"cluster_file":bool,"new_server":bool,"recorded_system_identifier":"..."}`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterFlags(cmd)
	cmd.ValidArgsFunction = firstArgHostName(configPath)
	cmd.Flags().StringVar(&opts.To, "to-dsn", "", "DSN of the promoted standby, as the cluster file is to hold it")
	deprecatedAlias(cmd, cmd.Flags(), "to-dsn", "to")
	cmd.Flags().BoolVar(&opts.NewServer, "new-server", false, "the host's database was restored onto another server (its own system identifier)")
	cmd.Flags().DurationVar(&opts.Margin, "margin", hosts.DefaultFailoverMargin, "clock skew allowed between the old primary and this machine")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if opts.To == "" {
			return usagef("--to-dsn DSN is required: the promoted standby's DSN")
		}
		if opts.Margin <= 0 {
			return usagef("--margin must be positive")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		res, err := hosts.Failover(cmd.Context(), c, args[0], opts)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), res)
		}
		printFailover(cmd.OutOrStdout(), res)
		return nil
	}
	return cmd
}

func printFailover(w io.Writer, r *hosts.FailoverResult) {
	if r.NewServer {
		fmt.Fprintf(w, "host %s: moved to the new server %s (timeline %d, system identifier %s, was %s)\n", r.Host, r.DSN, r.Timeline, r.SystemIdentifier, r.RecordedSystemIdentifier)
	} else {
		fmt.Fprintf(w, "host %s: failed over to %s (timeline %d, system identifier %s)\n", r.Host, r.DSN, r.Timeline, r.SystemIdentifier)
	}
	src := fmt.Sprintf("this machine's clock + %s margin", time.Duration(r.MarginMS)*time.Millisecond)
	if r.RecordedLeadMS > 0 {
		src += fmt.Sprintf(" + %s recorded lead of the old primary's clock", time.Duration(r.RecordedLeadMS)*time.Millisecond)
	}
	if r.BoundSource == hosts.BoundReplicated {
		src = "a counter replicated from the old primary + margin"
	}
	fmt.Fprintf(w, "bound: %s (%s); %s\n", r.Bound.Format(time.RFC3339Nano), src, serverClockOffset(r.ServerBehindMS))
	fmt.Fprintf(w, "advanced %d shards by up to %d ms\n", len(r.Shards), r.AdvancedMS)
	for _, s := range r.Shards {
		fmt.Fprintf(w, "  shard %d (%s): +%d ms\n", s.Shard, s.Schema, s.AdvancedMS)
	}
	fmt.Fprintf(w, "catalog generation %d", r.Generation)
	if r.ClusterFile {
		fmt.Fprint(w, "; cluster file updated")
	}
	fmt.Fprintln(w)
}

// serverClockOffset words FailoverResult.ServerBehindMS: a negative
// "behind" is a clock ahead, said with its absolute value.
func serverClockOffset(behindMS int64) string {
	switch d := time.Duration(behindMS) * time.Millisecond; {
	case d > 0:
		return fmt.Sprintf("the new server's clock is %s behind this machine's", d)
	case d < 0:
		return fmt.Sprintf("the new server's clock is %s ahead of this machine's", -d)
	default:
		return "the new server's clock agrees with this machine's to the millisecond"
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

func newHostCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "host",
		Short: "List hosts, change a host's address, fail over, drain and remove hosts",
		Long: `Each command changes a host in the catalog and in the cluster file together
(the file is edited in place, comments kept), so that the two agree: running
routers follow at their next refresh. See docs/operations.md.

  shardid host list                  # shards, state, server, role, replication lag
  shardid host set-dsn pg2 'postgres://app@10.0.0.7:5432/app'
  shardid host failover pg1 --to-dsn 'postgres://app@10.0.0.6:5432/app'   # a promoted standby
  shardid host drain pg3             # mark it drain, move every shard away
  shardid host remove pg3            # once it holds nothing`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newHostListCmd(), newHostSetDSNCmd(), newHostDrainCmd(), newHostRemoveCmd(), newHostFailoverCmd())
	return cmd
}

func newHostListCmd() *cobra.Command {
	var (
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "list [--json] [--timeout DURATION]",
		Short: "Each host: DSN, shards, state, the server it reaches, role, replication lag",
		Long: `Probes every host at once (each for at most --timeout) and prints, per host:
its DSN without the password, the shards the catalog places there, its state
(ok, draining, unreachable), what its server says about itself (system
identifier, timeline, version, the address it actually reached: with a DSN naming
several servers, the one that answered), its role (primary or standby) and the
replication lag where it can be read (a primary's physical standbys from
pg_stat_replication, a standby's time since the last transaction it replayed).
An online move's logical replication is not a standby: a line under the table
names each move the host sends (move id, shard, target, lag).
A host that does not answer is a row saying so, not a failure. --json prints
[{"name":"pg1","dsn":"...","shards":N,"ranges":"0-5","state":"ok","drain":false,
"server":{"system_identifier":"...","timeline":N,"version":"...","address":"127.0.0.1:5432",
"database":"app","role":"primary","cluster":"demo","host":"pg1",
"standbys":[{"name":"...","address":"...","state":"streaming","replay_lag_ms":N}],
"moves":[{"id":N,"shard":N,"to":"pg3","slot":"shardid_m...","state":"streaming","lag_bytes":N,"replay_lag_ms":N}],
"replay_lag_ms":null},"error":""}].`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the hosts as JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", hosts.DefaultProbeTimeout, "how long to wait for each host")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if timeout <= 0 {
			return usagef("--timeout must be positive")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		list, err := hosts.List(cmd.Context(), c, hosts.ListOptions{ProbeTimeout: timeout})
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), list)
		}
		printHosts(cmd.OutOrStdout(), list)
		return nil
	}
	return cmd
}

func printHosts(w io.Writer, list []hosts.Host) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tSTATE\tSHARDS\tROLE\tREACHED\tSYSTEM ID\tVERSION\tLAG\tDSN")
	var notes []string
	for _, h := range list {
		shards := fmt.Sprintf("%d", h.Shards)
		if h.Shards > 0 {
			shards += " (" + h.Ranges + ")"
		}
		role, reached, sysid, version, lag := "-", "-", "-", "-", "-"
		if s := h.Server; s != nil {
			role, reached, version = s.Role, s.Address, s.Version
			if s.SystemID != "" {
				sysid = s.SystemID
			}
			lag = lagText(s)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.State, shards, role, reached, sysid, version, lag, h.DSN)
		if h.Error != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", h.Name, oneLine(h.Error)))
		}
		if h.Mismatch != "" {
			notes = append(notes, h.Mismatch+" (run shardid init, or a host command, to settle it)")
		}
		if h.Server != nil {
			for _, m := range h.Server.Moves {
				notes = append(notes, fmt.Sprintf("%s: %s", h.Name, moveReplicationText(m)))
			}
		}
	}
	tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

// moveReplicationText is one move's logical replication seen on its
// source: not a standby, so not in the LAG column.
func moveReplicationText(m hosts.MoveReplication) string {
	who := fmt.Sprintf("sends move %d (shard %d to %s)", m.ID, m.Shard, m.To)
	if m.ID == 0 {
		who = "holds replication slot " + m.Slot + ", which no open move names (rebalance status; abort or cleanup drops it)"
	}
	state := m.State
	if state == "" {
		state = "target not connected"
	}
	lag := "nothing confirmed yet"
	if m.LagBytes != nil {
		lag = fmt.Sprintf("%d bytes behind", *m.LagBytes)
	}
	if m.LagMS != nil {
		lag += fmt.Sprintf(", %s", time.Duration(*m.LagMS*float64(time.Millisecond)).Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: %s, %s", who, state, lag)
}

// lagText is a server's replication lag: a standby's own, or a primary's
// standbys' ("none" for a primary without standbys).
func lagText(s *hosts.Server) string {
	ms := func(v *float64) string {
		if v == nil {
			return "unknown"
		}
		return (time.Duration(*v * float64(time.Millisecond))).Round(time.Millisecond).String()
	}
	if s.Role == hosts.RoleStandby {
		return ms(s.ReplayLagMS)
	}
	if len(s.Standbys) == 0 {
		return "no standby"
	}
	var parts []string
	for _, sb := range s.Standbys {
		parts = append(parts, fmt.Sprintf("%s %s %s", sb.Name, sb.State, ms(sb.LagMS)))
	}
	return strings.Join(parts, ", ")
}

func newHostSetDSNCmd() *cobra.Command {
	var (
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "set-dsn NAME DSN [--json]",
		Short: "Point a host at a new address of the same server",
		Long: `Records DSN as host NAME's in the catalog and in the cluster file, once the
server at DSN proves to be the host's own server at a new address, by what the
servers say: the database there records itself as host NAME of this cluster
(shardid.host_info), the server is not in recovery, it has the system
identifier and timeline the catalog recorded for the host (a promoted standby,
on a newer timeline, is refused: its counters may lack ids the old primary
handed out; shardid host failover NAME --to-dsn DSN advances them first), and, when
the old address still answers, both report the same database, and the old
one, if it still accepts writes, is the very database DSN reaches. Anything else is
refused and nothing changes. Running routers connect to the new address at
their next refresh and close their pools on the old one. To follow a failover
without this command, give the host a DSN naming both servers
(docs/operations.md). --json prints {"host":"pg2","old_dsn":"...",
"new_dsn":"...","changed":true,"old_answered":false,"server":{...},"generation":N}.`,
		Args: cobra.ExactArgs(2),
	}
	configPath := addClusterFlags(cmd)
	cmd.ValidArgsFunction = firstArgHostName(configPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", hosts.DefaultProbeTimeout, "how long to wait for the new and the old server")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if timeout <= 0 {
			return usagef("--timeout must be positive")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		res, err := hosts.SetDSN(cmd.Context(), c, args[0], args[1], hosts.SetDSNOptions{ProbeTimeout: timeout})
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), res)
		}
		w := cmd.OutOrStdout()
		s := res.Server
		if !res.Changed {
			fmt.Fprintf(w, "host %s already has this DSN; nothing changed\n", res.Host)
			return nil
		}
		fmt.Fprintf(w, "host %s: DSN %s -> %s\n", res.Host, res.OldDSN, res.NewDSN)
		fmt.Fprintf(w, "the new server: %s %s, database %s, system identifier %s, records itself as host %s of cluster %s\n",
			s.Role, s.Address, s.Database, orUnknown(s.SystemID), s.Host, s.Cluster)
		if res.OldAnswered {
			fmt.Fprintln(w, "the old address still answers: the same database (same system identifier and name)")
		}
		fmt.Fprintf(w, "catalog and %s updated; catalog generation %d (routers follow at their next refresh)\n", res.Config.Path, res.Generation)
		return nil
	}
	return cmd
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown (the role may not read it)"
	}
	return s
}

// hostDrainResult is what host drain did. JSON:
// {"host":"pg3","marked":{...},"plan":{...}|null,"apply":{...}|null}.
type hostDrainResult struct {
	Host   string                 `json:"host"`
	Marked *hosts.ChangeResult    `json:"marked"`
	Plan   *rebalance.Plan        `json:"plan"`
	Apply  *rebalance.ApplyResult `json:"apply"`
}

func newHostDrainCmd() *cobra.Command {
	var (
		asJSON bool
		dryRun bool
		af     applyFlags
	)
	cmd := &cobra.Command{
		Use:   "drain NAME [--dry-run] [--by count|size] [--workers K] [--mode online|offline|auto] [--dir DIR] [--keep DURATION] [--json]",
		Short: "Mark a host drain and move every shard away from it",
		Long: `Marks host NAME drain in the catalog and the cluster file (as drain: true
under it and shardid init would), then plans the moves of every one of its
shards to the other hosts (by count: to those below their share; by size: to
the least loaded) and runs them as 'shardid rebalance apply' does, with the
same preflight, journal and resumption; the other hosts give nothing away.
Run it again after an interruption. --dry-run marks nothing and prints the
plan. Afterwards 'shardid rebalance cleanup --all' drops the retired copies
(after --keep) and 'shardid host remove NAME' takes the host out. --json
prints {"host":"pg3","marked":{...},"plan":{...}|null,"apply":{...}|null}.`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterFlags(cmd)
	cmd.ValidArgsFunction = firstArgHostName(configPath)
	af.add(cmd, "spread the shards by count or by size")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan; mark nothing, move nothing")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		applyOpts, err := af.options(cmd, *configPath)
		if err != nil {
			return err
		}
		applyOpts.Plan.Only = []string{name}
		copts, err := clusterOptions(cmd)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		res := hostDrainResult{Host: name}
		out := cmd.OutOrStdout()
		// The plan and its preflight first, as if the host were marked:
		// a failed check refuses the drain before the mark is made.
		cfg, err := hosts.WithDrain(c.Config(), name)
		if err != nil {
			return err
		}
		pc, err := cluster.Open(ctx, cfg, copts...)
		if err != nil {
			return err
		}
		plan, err := rebalance.PlanApply(ctx, pc, applyOpts)
		pc.Close() // each handle holds its budget only while it works
		if err != nil || dryRun {
			err = reportPreflight(cmd.ErrOrStderr(), err)
			if plan != nil {
				res.Plan = plan
				if asJSON {
					return firstErr(err, writeJSON(out, res))
				}
				printPlan(out, plan)
			}
			return err
		}
		c.Close() // the handle on the marked cluster takes over
		dc, err := cluster.Open(ctx, cfg, copts...)
		if err != nil {
			return err
		}
		defer dc.Close()
		// The mark is made inside the apply, once it holds its lock and
		// its preflight has passed on the connections its moves use: a
		// drain that cannot reach the servers (their connection slots all
		// taken) is refused with nothing marked.
		applyOpts.BeforeChange = func(ctx context.Context) error {
			var err error
			res.Marked, err = hosts.SetDrain(ctx, dc, name, true)
			if err == nil && !asJSON && res.Marked.Changed {
				fmt.Fprintf(out, "host %s marked drain in the catalog and %s\n", name, res.Marked.Config.Path)
			}
			return err
		}
		bars := newMoveProgress(cmd.ErrOrStderr())
		applyOpts.Move.Progress = bars.Update
		res.Apply, err = rebalance.Apply(ctx, dc, applyOpts)
		bars.Done()
		err = reportPreflight(cmd.ErrOrStderr(), err)
		if h, _ := c.Config().Host(name); err != nil && (res.Marked != nil || h.Drain) {
			// Marked (now or by an earlier run), not (all) moved: say so,
			// and what moves the rest.
			err = fmt.Errorf("host %s is marked drain and the drain did not finish: %w; shardid rebalance apply (or shardid host drain %s again) moves what is left", name, err, name)
		}
		if asJSON {
			return firstErr(err, writeJSON(out, res))
		}
		if res.Apply != nil {
			printApply(out, res.Apply, err)
		}
		return err
	}
	return cmd
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func newHostRemoveCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "remove NAME [--json]",
		Short: "Take a host that holds nothing out of the catalog and the cluster file",
		Long: `Removes host NAME from the catalog and the cluster file's hosts, once it holds
no shard, takes part in no unfinished move and keeps no moved shard's retired
copy; otherwise it is refused, naming which, and nothing changes. The server
and its database are not touched: drop or stop them yourself. Running routers
close their pools on the host at their next refresh. --json prints
{"host":"pg3","changed":true,"catalog":true,"file":true,"generation":N}.`,
		Args: cobra.ExactArgs(1),
	}
	configPath := addClusterFlags(cmd)
	cmd.ValidArgsFunction = firstArgHostName(configPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		res, err := hosts.Remove(cmd.Context(), c, args[0])
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), res)
		}
		var where []string
		if res.Catalog {
			where = append(where, "the catalog")
		}
		if res.File {
			where = append(where, res.Config.Path)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "removed host %s from %s (catalog generation %d); its server and database are left as they are\n",
			res.Host, strings.Join(where, " and "), res.Generation)
		return nil
	}
	return cmd
}

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

func newRebalanceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Plan and run shard moves after adding a host to the cluster file or marking one drain",
		Long: `Add a host to the cluster file (or mark one "drain: true"; on a cluster of
'shardid local up', 'shardid local add-host' adds one), then:

  shardid rebalance plan                        # the moves, changes nothing
  shardid rebalance apply --dir shard-migrations  # runs them, online, resumable
  shardid status                                # the map, and the moves in progress

Each move builds the shard's schema on the new host (generator, then the
migrations of --dir up to the shard's version), copies it with logical
replication while it keeps taking writes, fences it for a short cut-over,
carries its id counter over, checks row counts and checksums per table and
flips the map. The old copy is kept renamed and fenced (--keep) until
'shardid rebalance cleanup'. See docs/rebalance.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRebalancePlanCmd(), newRebalanceApplyCmd(), newRebalanceStatusCmd(), newRebalanceAbortCmd(), newRebalanceCleanupCmd())
	return cmd
}

func parseBy(by string) (rebalance.PlanBy, error) {
	switch by {
	case "count", "size":
		return rebalance.PlanBy(by), nil
	}
	return "", usagef("--by %q: want count or size", by)
}

func newRebalancePlanCmd() *cobra.Command {
	var (
		by       string
		mode     string
		parallel int
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "plan [--by count|size] [--mode online|offline|auto] [--workers K] [--json]",
		Short: "Compute the fewest moves that balance the hosts; changes nothing",
		Long: `Reads the map from the catalog, the hosts (and their drain marks) from the
cluster file, and each shard's size from its host. --by count (default) evens
out the number of shards per host; --by size the total relation size. A host
marked drain gives all its shards away; a host that is balanced gives none.
The plan is deterministic.

It then checks the hosts for the moves as 'rebalance apply' with the same
--mode and --workers would run them (the preflight; see 'shardid rebalance
apply --help'): a failed check is printed with its fix, and the command
exits 1.

--json prints {"moves":[{"shard":N,"from":"pg1","to":"pg4","bytes":N,"mode":"online"}],
"preflight":[{"host":"pg1","role":"source","setting":"wal_level","value":"logical",
"need":"logical","ok":true,"shards":[N],"fix":{...}}]}; a move that auto mode
sends offline has "mode_reason".`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().StringVar(&by, "by", string(rebalance.ByCount), "balance shard counts (count) or total relation size (size)")
	cmd.Flags().StringVar(&mode, "mode", string(rebalance.MoveOnline), "the mode to check the hosts for: online, offline or auto")
	cmd.Flags().IntVar(&parallel, "workers", 1, "the moves at once to check the hosts for")
	deprecatedAlias(cmd, cmd.Flags(), "workers", "parallel")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		pb, err := parseBy(by)
		if err != nil {
			return err
		}
		m, err := parseMode(mode)
		if err != nil {
			return err
		}
		if parallel < 1 {
			return usagef("--workers must be at least 1")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		plan, err := rebalance.PlanRebalance(cmd.Context(), c, rebalance.PlanOptions{By: pb, Mode: m, Parallel: parallel})
		if plan == nil {
			return err
		}
		if asJSON {
			if jerr := writeJSON(cmd.OutOrStdout(), plan); jerr != nil {
				return jerr
			}
		} else {
			printPlan(cmd.OutOrStdout(), plan)
			fmt.Fprintln(cmd.OutOrStdout())
			printPreflight(cmd.OutOrStdout(), plan.Preflight)
		}
		return reportPreflight(cmd.ErrOrStderr(), err)
	}
	return cmd
}

func printPlan(w io.Writer, plan *rebalance.Plan) {
	if len(plan.Moves) == 0 {
		fmt.Fprintf(w, "balanced by %s: nothing to move\n\n", plan.By)
	} else {
		fmt.Fprintf(w, "%d moves (by %s, catalog generation %d)\n\n", len(plan.Moves), plan.By, plan.Generation)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SHARD\tFROM\tTO\tBYTES\tMODE")
		for _, m := range plan.Moves {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", m.Shard, m.From, m.To, byteSize(m.Bytes), modeText(m.Mode, m.ModeReason))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tSHARDS\tBYTES\tAFTER\tBYTES AFTER")
	for i, b := range plan.Before {
		a := plan.After[i]
		name := b.Host
		if b.Drain {
			name += " (drain)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", name, b.Shards, byteSize(b.Bytes), a.Shards, byteSize(a.Bytes))
	}
	tw.Flush()
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// moveFlags are the flags every command that moves shards shares.
type moveFlags struct {
	mode string
	dir  string
	keep time.Duration
	// catchupTimeout bounds an online move's catch-up.
	catchupTimeout time.Duration
	// conninfoPassword: include or omit the source's password in the
	// subscription's conninfo.
	conninfoPassword string
}

func (f *moveFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.mode, "mode", string(rebalance.MoveOnline), "online (logical replication, short cut-over), offline (fence, COPY, flip) or auto (online where the hosts allow it, else offline)")
	cmd.Flags().StringVar(&f.dir, "dir", "", "directory of the shards' tern migrations, needed when they were migrated (default: the cluster file's migrations:)")
	cmd.Flags().DurationVar(&f.keep, "keep", rebalance.DefaultKeep, "keep the old copy, renamed and fenced, this long (0: drop it at once)")
	cmd.Flags().DurationVar(&f.catchupTimeout, "catchup-timeout", rebalance.DefaultCatchupTimeout, "fail an online move whose target has not caught up with the source by then (it stays resumable)")
	cmd.Flags().StringVar(&f.conninfoPassword, "conninfo-password", "include", "include or omit the source's password in an online move's subscription (omit: the target's server uses its own .pgpass or a certificate; needs a superuser on the target)")
}

// options are the move options the flags say; the migrations directory
// is --dir, else the one the cluster file at configPath names.
func (f *moveFlags) options(cmd *cobra.Command, configPath string) (rebalance.MoveOptions, error) {
	var o rebalance.MoveOptions
	var err error
	if o.Mode, err = parseMode(f.mode); err != nil {
		return o, err
	}
	if f.keep < 0 {
		return o, usagef("--keep must not be negative")
	}
	o.Keep = &f.keep
	if f.catchupTimeout <= 0 {
		return o, usagef("--catchup-timeout must be positive")
	}
	o.CatchupTimeout = f.catchupTimeout
	switch f.conninfoPassword {
	case "include":
	case "omit":
		o.ConnInfoPassword = rebalance.ConnInfoPasswordOmit
	default:
		return o, usagef("--conninfo-password %q: want include or omit", f.conninfoPassword)
	}
	dir, err := migrationDir(cmd, f.dir, configPath)
	if err != nil {
		return o, err
	}
	if dir != "" {
		set, err := migrate.LoadMigrationDir(dir)
		if err != nil {
			return o, err
		}
		o.Migrations = set
	}
	return o, nil
}

func parseMode(mode string) (rebalance.MoveMode, error) {
	switch m := rebalance.MoveMode(mode); m {
	case rebalance.MoveOnline, rebalance.MoveOffline, rebalance.MoveAuto:
		return m, nil
	}
	return "", usagef("--mode %q: want online, offline or auto", mode)
}

// modeText is a move's mode, with why auto mode sent it offline.
func modeText(mode rebalance.MoveMode, reason string) string {
	if reason != "" {
		return fmt.Sprintf("%s (auto: %s)", mode, reason)
	}
	return string(mode)
}

// applyFlags are the flags of a command that runs moves as rebalance
// apply does (rebalance apply, host drain).
type applyFlags struct {
	by       string
	parallel int
	wait     time.Duration
	mf       moveFlags
}

func (f *applyFlags) add(cmd *cobra.Command, byUsage string) {
	cmd.Flags().StringVar(&f.by, "by", string(rebalance.ByCount), byUsage)
	cmd.Flags().IntVar(&f.parallel, "workers", 1, "moves to run at once")
	deprecatedAlias(cmd, cmd.Flags(), "workers", "parallel")
	cmd.Flags().DurationVar(&f.wait, "wait", rebalance.DefaultApplyWait, "how long to wait for another manager's apply or move")
	f.mf.add(cmd)
}

// options checks the flags (one usage error) and gives apply's options.
func (f *applyFlags) options(cmd *cobra.Command, configPath string) (rebalance.ApplyOptions, error) {
	pb, err := parseBy(f.by)
	if err != nil {
		return rebalance.ApplyOptions{}, err
	}
	if f.parallel < 1 {
		return rebalance.ApplyOptions{}, usagef("--workers must be at least 1")
	}
	if f.wait <= 0 {
		return rebalance.ApplyOptions{}, usagef("--wait must be positive")
	}
	mo, err := f.mf.options(cmd, configPath)
	if err != nil {
		return rebalance.ApplyOptions{}, err
	}
	return rebalance.ApplyOptions{Plan: rebalance.PlanOptions{By: pb}, Parallel: f.parallel, Move: mo, Wait: f.wait}, nil
}

func newRebalanceApplyCmd() *cobra.Command {
	var (
		asJSON bool
		af     applyFlags
	)
	cmd := &cobra.Command{
		Use:   "apply [--by count|size] [--workers K] [--mode online|offline|auto] [--dir DIR] [--keep DURATION] [--wait DURATION] [--json]",
		Short: "Run the plan's moves, resuming any an earlier run left unfinished",
		Long: `Registers hosts new in the cluster file in the catalog (as init does),
finishes the moves an interrupted run left in the journal, then plans and runs
the moves, --workers at a time. Every move is journaled before it starts and
records each phase it completes, so running apply again after an interruption
resumes where it stopped. A move that fails before its flip leaves its shard
serving on its old host; 'shardid rebalance abort' removes its partial copy.

Progress goes to stderr on terminals (per move: phase, rows, bytes, lag); the
summary to stdout, with --json:
{"resumed":N,"moves":[{"id":N,"shard":N,"from":"pg1","to":"pg4","mode":"online",
"phase":"cleaned","rows":N,"bytes":N,"refused_ms":N,"elapsed_ms":N,"generation":N,
"retired_schema":"shard_0005_moved_g12"}],"elapsed_ms":N,"generation":N}, plus
"waited_ms":N and "finished_by_others":[N] when it waited for another manager.

Two applies at once do not fail each other: the second waits (at most --wait)
for the first, then runs what is left, usually nothing (exit 0). A move that
another manager is running is waited for the same way.

Without a terminal, each move's phase changes go to stderr, one line each
("move 3 shard 16 pg1 -> pg4: copy"); with --json stdout holds the summary only.
--dir defaults to the cluster file's "migrations:" (relative to the file).

Before anything changes (no host registered, no move journaled) apply checks
every source and target (the preflight, as 'rebalance plan' shows it): a failed
check refuses the whole run with one line per host naming the setting, its
value, the value needed and the way out (ALTER SYSTEM and whether a restart is
needed, --mode offline).

Online moves (--mode online, the default) need, on the servers:
  source host: wal_level = logical (changing it needs a restart), a free
    replication slot (max_replication_slots) and WAL sender (max_wal_senders)
    per batch (the moves from one source to one target share one), a
    replication line in pg_hba.conf for the mover, and a role that may create
    publications and logical replication slots (REPLICATION and CREATE on the
    database, or superuser);
  target host: a role that may create subscriptions (superuser in PostgreSQL
    15, pg_create_subscription from 16), free logical replication workers
    (max_logical_replication_workers, within max_worker_processes; both need
    a restart): one per batch, and batches run in waves of the free workers,
    so one free worker is enough; a network path to the source as its DSN in
    the cluster file names it;
  every table of a moving shard: a primary key or replica identity (else
    use --mode offline).
The target starts subscription workers at most once per
wal_retrieve_retry_interval (5s by default); a batch's subscriptions start in
one pass, so the pause is paid once per wave, not once per move. 'shardid local up' starts its servers with all of this
set; --mode offline needs none of it. --mode auto moves each shard online where
its hosts and tables allow it and offline where they do not, and says why in the
MODE column ("offline (auto: wal_level is replica on pg1)") and in JSON
("mode_reason"). Online stays the default: offline refuses writes to the shard
for its whole copy, which should be asked for, not fallen into. See
docs/rebalance.md, "Requirements and limits".`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	af.add(cmd, "balance shard counts (count) or total relation size (size)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts, err := af.options(cmd, *configPath)
		if err != nil {
			return err
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		bars := newMoveProgress(cmd.ErrOrStderr())
		opts.Move.Progress = bars.Update
		res, err := rebalance.Apply(cmd.Context(), c, opts)
		bars.Done()
		err = reportPreflight(cmd.ErrOrStderr(), err)
		if res != nil {
			if asJSON {
				if jerr := writeJSON(cmd.OutOrStdout(), res); jerr != nil && err == nil {
					err = jerr
				}
			} else {
				printApply(cmd.OutOrStdout(), res, err)
			}
		}
		return err
	}
	return cmd
}

func printMoves(w io.Writer, moves []*rebalance.MoveResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MOVE\tSHARD\tFROM\tTO\tMODE\tPHASE\tROWS\tBYTES\tREFUSED\tTIME\tERROR")
	for _, m := range moves {
		if m == nil {
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.ID, m.Shard, m.From, m.To, modeText(m.Mode, m.ModeReason), m.Phase, m.Rows, byteSize(m.Bytes),
			m.Refused.Round(time.Millisecond), m.Elapsed.Round(time.Millisecond), oneLine(errorWithHint(m.Err)))
	}
	tw.Flush()
}

// printApply prints what an apply did; err is the apply's error, after
// which a run that moved nothing prints nothing (the error says why): it
// was not balanced, it failed.
func printApply(w io.Writer, res *rebalance.ApplyResult, err error) {
	waited := res.Waited.Round(time.Millisecond)
	if len(res.Moves) == 0 {
		if err != nil {
			return
		}
		if res.Waited > 0 {
			fmt.Fprintf(w, "waited %s for another rebalance apply; it left nothing to do: balanced, nothing to move\n", waited)
			return
		}
		fmt.Fprintln(w, "balanced: nothing to move")
		return
	}
	printMoves(w, res.Moves)
	if len(res.FinishedByOthers) > 0 {
		fmt.Fprintf(w, "\nmoves %v were finished by another manager while this run waited (%s): nothing left to do for them\n", res.FinishedByOthers, waited)
	}
	var worst time.Duration
	for _, m := range res.Moves {
		if m != nil {
			worst = max(worst, m.Refused)
		}
	}
	fmt.Fprintf(w, "\n%d moves (%d resumed) in %s, writes refused at most %s per shard; catalog generation %d\n",
		len(res.Moves), res.Resumed, res.Elapsed.Round(time.Millisecond),
		worst.Round(time.Millisecond), res.Generation)
}

func newRebalanceStatusCmd() *cobra.Command {
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--all] [--json]",
		Short: "List unfinished moves from the journal (--all: every move)",
		Long: `Lists the moves the journal holds as unfinished (with --all, every move):
id, shard, hosts, mode, phase, start and the error that stopped it. A stopped
move is resumed by 'shardid rebalance apply' (or 'shardid shard move N --to
HOST' again) and rolled back by 'shardid rebalance abort --shard N'.
'shardid status' shows the moves in progress beside the map. --json prints
{"moves":[{"id":N,"shard":N,"from":"pg1","to":"pg4","mode":"online","phase":"copy",
"rows":N,"refused_ms":N,...}]} (refused_ms: how long writes were refused, absent until a
refused window has ended).`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "list finished and aborted moves too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the moves as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		recs, err := rebalance.Moves(cmd.Context(), c, all)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), rebalance.MoveList{Moves: recs})
		}
		if len(recs) == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "no unfinished moves")
			return nil
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MOVE\tSHARD\tFROM\tTO\tMODE\tPHASE\tROWS\tREFUSED\tSTARTED\tERROR")
		for _, r := range recs {
			refused := "-" // no refused window has ended yet
			if d, ok := r.Refused(); ok {
				refused = d.Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Shard, r.From, r.To, r.Mode, r.Phase, r.Rows, refused, r.Started.UTC().Format(time.RFC3339), r.Error)
		}
		return tw.Flush()
	}
	return cmd
}

func newRebalanceAbortCmd() *cobra.Command {
	var (
		shards []int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "abort [--shard N]... [--json]",
		Short: "Roll back unfinished moves that have not flipped the map",
		Long: `Drops the target's partial copy, the subscription, the replication slot
and the publication, lifts the source's fence and sets the shard active again
on its old host. Without --shard, every unfinished move. A move that already
flipped the map cannot be aborted: move the shard back with 'shardid shard move'.
--json prints {"aborted":[{"id":N,"shard":N,"from":"pg1","to":"pg4","phase":"copy"}]}.`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().IntSliceVar(&shards, "shard", nil, "abort the move of this shard (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was rolled back as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		res, err := rebalance.AbortMove(cmd.Context(), c, shards)
		if asJSON && res != nil {
			if jerr := writeJSON(cmd.OutOrStdout(), map[string]any{"aborted": res}); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			for _, a := range res {
				fmt.Fprintf(cmd.OutOrStdout(), "aborted move %d: shard %d stays on %s (was in phase %s towards %s)\n", a.ID, a.Shard, a.From, a.Phase, a.To)
			}
		}
		return err
	}
	return cmd
}

func newRebalanceCleanupCmd() *cobra.Command {
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "cleanup [--all] [--json]",
		Short: "Drop moved shards' old copies whose keep period has passed (--all: every one)",
		Long: `A move keeps the shard's old copy on its old host, renamed
shard_NNNN_moved_gG and fenced, for the --keep of 'rebalance apply' or 'shard
move' (default 24h): until then a move can be checked against it. cleanup
drops the copies whose time is up and says until when it keeps the others;
--all drops every one now. --json prints
{"dropped":[{"move":N,"shard":N,"host":"pg1","schema":"shard_0005_moved_g12"}],"kept":N,
 "kept_copies":[{"move":N,"shard":N,"host":"pg1","schema":"...","keep_until":"RFC 3339"}]}.

  shardid rebalance cleanup         # drops the copies whose --keep has passed
  shardid rebalance cleanup --all   # drops every old copy now`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "drop every retired copy, also those inside their keep period")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was dropped as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		res, err := rebalance.Cleanup(cmd.Context(), c, rebalance.CleanupOptions{All: all})
		if res != nil {
			if asJSON {
				if jerr := writeJSON(cmd.OutOrStdout(), res); jerr != nil && err == nil {
					err = jerr
				}
			} else {
				for _, f := range res.Finished {
					fmt.Fprintf(cmd.OutOrStdout(), "finished move %d (shard %d, %s -> %s): its cleanup had not finished\n", f.ID, f.Shard, f.From, f.To)
				}
				for _, d := range res.Dropped {
					fmt.Fprintf(cmd.OutOrStdout(), "dropped %s on %s (shard %d, move %d)\n", d.Schema, d.Host, d.Shard, d.MoveID)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d dropped, %d kept\n", len(res.Dropped), res.Kept)
				printKeptCopies(cmd.OutOrStdout(), res.KeptCopies, time.Now())
			}
		}
		return err
	}
	return cmd
}

// keptShown is how many kept copies cleanup lists one by one.
const keptShown = 10

// printKeptCopies says until when cleanup keeps the old copies it left
// alone, and how to drop them now.
func printKeptCopies(w io.Writer, kept []rebalance.KeptCopy, now time.Time) {
	if len(kept) == 0 {
		return
	}
	until := func(k rebalance.KeptCopy) string {
		left := k.KeepUntil.Sub(now).Round(time.Minute)
		in := "in less than a minute"
		if left >= time.Minute {
			in = "in " + strings.TrimSuffix(left.String(), "0s")
		}
		return fmt.Sprintf("%s (%s)", k.KeepUntil.UTC().Format(time.RFC3339), in)
	}
	if len(kept) <= keptShown {
		for _, k := range kept {
			fmt.Fprintf(w, "kept %s on %s (shard %d, move %d) until %s\n", k.Schema, k.Host, k.Shard, k.MoveID, until(k))
		}
	} else {
		fmt.Fprintf(w, "kept %d old copies: the first expires %s, the last %s\n", len(kept), until(kept[0]), until(kept[len(kept)-1]))
	}
	fmt.Fprintln(w, "old copies are kept for the --keep of apply or shard move (default 24h); a later cleanup drops them, 'shardid rebalance cleanup --all' drops them now")
}

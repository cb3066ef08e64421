package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/repair"
)

func newCatalogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Repair the shard catalog",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCatalogRepairCmd())
	return cmd
}

func newCatalogRepairCmd() *cobra.Command {
	var fromHosts, yes, asJSON bool
	cmd := &cobra.Command{
		Use:   "repair --from-hosts [--yes] [--json]",
		Short: "Rebuild the catalog's map from the hosts' own records (after restoring an older catalog, or into an emptied one)",
		Long: `After the catalog database was restored from a backup older than the hosts
(routers refuse the shards it places wrongly, verify reports catalog-stale, init
refuses), rebuilds its map from what every host records of itself: each shard
goes to the host that holds its live copy at the newest generation, and hosts of
the cluster file the catalog forgot are added; a move the restored journal
holds unfinished is journaled as finished when the hosts hold its shard on its
target (with the retired copy it left), as aborted otherwise; retired copies of
moves the restored journal never saw are journaled, so that rebalance cleanup drops them
(or, where the shard lives on that host again, the DROP to run is shown).
A catalog that holds no cluster (its database created again empty after a
failed restore, or its schema dropped) while the hosts hold the cluster's
shards is rebuilt from their records: the cluster with the identity the hosts
record, every host that records it with the hash of its secret, every shard
where a host holds it ("create_catalog" in the plan). The differences are
shown first; they are applied with --yes (or after a confirmation on a terminal), in one
catalog transaction whose generation is above every generation a host recorded.
Two hosts holding one shard live at the same generation, or a shard no host
holds, stop it (naming them) and nothing changes; so does a host that cannot be
read. Exit 1 when differences were shown but not applied.

--json prints {"cluster":"...","create_catalog":bool,"identity":"...",
"catalog_generation":N,"host_generation":N,"add_hosts":[...],"shards":[{"shard":N,"from":"pg1","from_schema":"...",
"from_state":"...","to":"pg4","schema":"...","state":"active","generation":N}],
"close_moves":[N],"finish_moves":[{"move":N,"shard":N,"from":"pg1","to":"pg4",
"retired":"shard_0002_moved_g9","flip_generation":N}],"retired_copies":[{"host":"pg2","shard":N,"schema":"shard_0002_moved_g7",
"to":"pg4","journal":bool,"drop":"DROP SCHEMA ..."}],"applied":bool,"generation":N}.`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&fromHosts, "from-hosts", false, "rebuild the map from the hosts' records (required)")
	cmd.Flags().BoolVar(&yes, "yes", false, "apply the differences without asking")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan (and what was applied) as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !fromHosts {
			return usagef("--from-hosts is required (the hosts' records are the one source a repair reads)")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		p, err := repair.PlanFromHosts(cmd.Context(), c)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		interactive := !p.Empty() && !yes && !asJSON && readerIsTerminal(cmd.InOrStdin()) && isTerminal(out)
		apply := yes
		if interactive {
			printRepair(out, p)
			apply = confirm(cmd.InOrStdin(), out, "apply these changes to the catalog?")
		}
		if apply && !p.Empty() {
			if p, err = repair.FromHosts(cmd.Context(), c, p); err != nil {
				return err
			}
		}
		switch {
		case asJSON:
			if err := writeJSON(out, p); err != nil {
				return err
			}
		case interactive && p.Applied:
			fmt.Fprintf(out, "catalog repair: applied at generation %d\n", p.Generation)
		case !interactive:
			printRepair(out, p)
		}
		if !p.Empty() && !p.Applied {
			if !asJSON {
				fmt.Fprintln(out, "catalog repair: not applied (run it again with --yes)")
			}
			return exitError{code: 1}
		}
		return nil
	}
	return cmd
}

func printRepair(w io.Writer, p *repair.Plan) {
	if p.Empty() {
		fmt.Fprintf(w, "catalog repair: the catalog (generation %d) agrees with the hosts' records (newest generation %d): nothing to do\n", p.CatalogGeneration, p.HostGeneration)
		return
	}
	if p.CreateCatalog {
		identity := p.Identity
		if identity == "" {
			identity = "none recorded: a new one"
		}
		fmt.Fprintf(w, "+ cluster %s: the catalog holds none; created from the hosts' records (identity %s), above the newest generation a host recorded: %d\n", p.Cluster, identity, p.HostGeneration)
	} else {
		fmt.Fprintf(w, "catalog generation %d; newest generation a host recorded: %d\n", p.CatalogGeneration, p.HostGeneration)
	}
	for _, h := range p.AddHosts {
		fmt.Fprintf(w, "+ host %s (in the cluster file, its database records this cluster)\n", h)
	}
	for _, s := range p.Shards {
		if p.CreateCatalog {
			fmt.Fprintf(w, "+ shard %d: %s %s (%s, recorded at generation %d)\n", s.Shard, s.To, s.Schema, s.State, s.Generation)
			continue
		}
		fmt.Fprintf(w, "~ shard %d: %s %s (%s) -> %s %s (%s, recorded at generation %d)\n", s.Shard, s.From, s.FromSchema, s.FromState, s.To, s.Schema, s.State, s.Generation)
	}
	for _, id := range p.CloseMoves {
		fmt.Fprintf(w, "x move %d: closed (aborted in the journal; the hosts say where its shard is)\n", id)
	}
	for _, f := range p.FinishMoves {
		kept := "it kept no retired copy"
		if f.Retired != "" {
			kept = fmt.Sprintf("its retired copy %s on %s journaled (shardid rebalance cleanup drops it after the move's keep period)", f.Retired, f.From)
		}
		fmt.Fprintf(w, "v move %d: shard %d %s -> %s finished (the hosts hold the shard on its target); %s\n", f.Move, f.Shard, f.From, f.To, kept)
	}
	for _, r := range p.RetiredCopies {
		if r.Journal {
			fmt.Fprintf(w, "+ retired copy %s of shard %d on %s: journaled (shardid rebalance cleanup drops it)\n", r.Schema, r.Shard, r.Host)
		} else {
			fmt.Fprintf(w, "! retired copy %s of shard %d on %s, where the shard lives again: drop it there by hand when it is not wanted: %s\n", r.Schema, r.Shard, r.Host, r.Drop)
		}
	}
	if p.Applied {
		fmt.Fprintf(w, "catalog repair: applied at generation %d: %d shards placed anew, %d hosts added\n", p.Generation, len(p.Shards), len(p.AddHosts))
	}
}

// confirm asks question on w and reads y or yes from r.
func confirm(r io.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, _ := bufio.NewReader(r).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// readerIsTerminal reports whether r is a terminal (a confirmation can
// be asked).
func readerIsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isTerminal(f)
}

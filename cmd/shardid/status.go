package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr/install"
)

func init() { commands = append(commands, newStatusCmd) }

func newStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--config FILE] [--json]",
		Short: "Show hosts, shard counts per host, and each shard's host and state",
		Long: `Reads the map from the catalog. --json prints
{"generation":N,"hosts":[{"name":"pg1","shards":[0,1,...]}],"shards":[{"id":0,"schema":"shard_0000","host":"pg1","state":"active"}]}`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterConfigFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the map as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadCluster(*configPath)
		if err != nil {
			return err
		}
		st, err := install.ClusterStatus(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), st)
		}
		printStatus(cmd.OutOrStdout(), cfg.Cluster, st)
		return nil
	}
	return cmd
}

func printStatus(w io.Writer, cluster string, st *install.Status) {
	fmt.Fprintf(w, "cluster %s, generation %d, %d shards on %d hosts\n\n", cluster, st.Generation, len(st.Shards), len(st.Hosts))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tSHARDS")
	for _, h := range st.Hosts {
		fmt.Fprintf(tw, "%s\t%d\n", h.Name, len(h.Shards))
	}
	tw.Flush()
	fmt.Fprintln(w)
	// Each shard's host and state, as runs of consecutive shards.
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARDS\tHOST\tSTATE")
	for i := 0; i < len(st.Shards); {
		j := i
		for j+1 < len(st.Shards) && st.Shards[j+1].Host == st.Shards[i].Host && st.Shards[j+1].State == st.Shards[i].State {
			j++
		}
		ids := fmt.Sprint(st.Shards[i].ID)
		if j > i {
			ids = fmt.Sprintf("%d-%d", st.Shards[i].ID, st.Shards[j].ID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ids, st.Shards[i].Host, st.Shards[i].State)
		i = j + 1
	}
	tw.Flush()
}

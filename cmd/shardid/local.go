package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/app/localcluster"
	"github.com/shardid/shardid/shardmgr"
)

func newLocalCmd() *cobra.Command {
	var opts localcluster.Options
	cmd := &cobra.Command{
		Use:   "local",
		Short: "A cluster of local PostgreSQL servers that stays up between commands",
		Long: `Starts PostgreSQL servers from the system's binaries on free loopback ports
(as the postgres user when run as root), with the settings online moves need
(wal_level=logical, replication slots, senders and workers), keeps their data
under --dir, and writes a cluster file pointing at them. The servers keep
running after the command ends; 'shardid local down' stops them.

  shardid local up          # 3 servers, 64 shards, ./shardid.yaml; safe to re-run
  shardid local status
  shardid local add-host    # one more server, appended to the file's hosts
  shardid local remove-host pg4   # once it holds no shards: out of the catalog and the file, stopped
  shardid local down [--purge]

The servers are for trying shardid out: they run with fsync off.`,
		Args: cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&opts.Dir, "dir", localcluster.DefaultDir, "directory holding the servers' data and logs")
	cmd.PersistentFlags().StringVar(&opts.Config, "write-config", "", "cluster file local writes and keeps (default shardid.yaml, or the one up wrote)")
	deprecatedAlias(cmd, cmd.PersistentFlags(), "write-config", "config")
	asJSON := cmd.PersistentFlags().Bool("json", false, "print the result as JSON")
	cmd.AddCommand(newLocalUpCmd(&opts, asJSON), newLocalAddHostCmd(&opts, asJSON),
		newLocalRemoveHostCmd(&opts, asJSON), newLocalStatusCmd(&opts, asJSON), newLocalDownCmd(&opts, asJSON))
	return cmd
}

func newLocalUpCmd(opts *localcluster.Options, asJSON *bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up [--hosts N] [--shard-count N] [--dir DIR] [--write-config FILE]",
		Short: "Start the local servers, initialise the cluster, write the cluster file",
		Long: `The first run starts --hosts servers, writes the cluster file (catalog on pg1,
an app database per host, a segments: section with a seg database per host) and
runs init for --shard-count logical shards. It creates the catalog and seg databases
itself and revokes CONNECT on them from PUBLIC (the servers' superuser is the
cluster's only role), so that init and serve have nothing to warn about; grant
CONNECT to a role you add. Later runs find the servers, start those that
stopped, and change nothing else (--hosts and --shard-count apply to a new cluster
only). It never overwrites a cluster file it did not write.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Hosts < 1 || opts.Shards < 1 || opts.Shards > 8192 {
				return usagef("--hosts must be at least 1 and --shard-count between 1 and 8192")
			}
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			res, err := localcluster.Up(cmd.Context(), *opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if *asJSON {
				return writeJSON(out, res)
			}
			printLocalServers(out, res.Servers)
			if len(res.Databases) > 0 {
				// init and serve warn about a database every role may
				// connect to; the local cluster's are closed to PUBLIC.
				fmt.Fprintf(out, "\ndatabases (PUBLIC may not connect): %s\n", strings.Join(res.Databases, ", "))
			}
			file, err := os.ReadFile(res.Config)
			if err != nil {
				return err
			}
			if res.ConfigWritten {
				fmt.Fprintf(out, "\nwrote %s:\n", res.Config)
			} else {
				fmt.Fprintf(out, "\n%s (unchanged):\n", res.Config)
			}
			fmt.Fprintf(out, "  %s\n", strings.ReplaceAll(strings.TrimRight(string(file), "\n"), "\n", "\n  "))
			fmt.Fprintln(out)
			if cfg, err := shardmgr.LoadConfig(res.Config); err == nil {
				printInitResult(out, cfg, res.Init)
			}
			fmt.Fprintln(out, "\nnext:")
			for _, s := range localcluster.NextSteps(res.Config) {
				fmt.Fprintf(out, "  %s\n", s)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&opts.Hosts, "hosts", localcluster.DefaultHosts, "servers to start for a new cluster")
	cmd.Flags().IntVar(&opts.Shards, "shard-count", localcluster.DefaultShards, "logical shards of a new cluster")
	deprecatedAlias(cmd, cmd.Flags(), "shard-count", "shards")
	return cmd
}

func newLocalAddHostCmd(opts *localcluster.Options, asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "add-host",
		Short: "Start one more local server and add it to the cluster file's hosts",
		Long: `Starts one more server and appends it to the hosts: of the cluster file that
'shardid local up' wrote, and records it in the catalog (init). It holds no
shards until you move some to it:
'shardid rebalance plan', then 'shardid rebalance apply'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv, err := localcluster.AddHost(cmd.Context(), *opts)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(cmd.OutOrStdout(), srv)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added host %s (port %d) to the cluster file\nnext: shardid rebalance plan, then shardid rebalance apply\n", srv.Name, srv.Port)
			return nil
		},
	}
}

func newLocalRemoveHostCmd(opts *localcluster.Options, asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "remove-host NAME",
		Short: "Take a local server out of the cluster: catalog, cluster file, then stop it",
		Long: `The reverse of add-host, for a host that holds no shards: removes it from the
catalog (as init does for a host left out of the file) and from the cluster
file's hosts, stops its server and removes its data directory. A host that
still holds shards is refused, naming them, and nothing changes: drain it first
(drain: true under it in the cluster file, 'shardid rebalance apply', then
'shardid rebalance cleanup --all'). --json prints
{"name":"pg4","catalog_changes":["remove host pg4"],"stopped":true,"removed":"DIR"}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := localcluster.RemoveHost(cmd.Context(), *opts, args[0])
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			for _, c := range res.CatalogChanges {
				fmt.Fprintf(out, "catalog: %s\n", c)
			}
			state := "was not running"
			if res.Stopped {
				state = "stopped"
			}
			fmt.Fprintf(out, "removed host %s: out of the cluster file, server %s, %s removed\n", res.Name, state, res.Removed)
			return nil
		},
	}
}

func newLocalStatusCmd(opts *localcluster.Options, asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List the local servers: name, port, data directory, running or not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := localcluster.Status(*opts)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(cmd.OutOrStdout(), c)
			}
			printLocalServers(cmd.OutOrStdout(), c.Servers)
			fmt.Fprintf(cmd.OutOrStdout(), "cluster file: %s\n", c.Config)
			return nil
		},
	}
}

func newLocalDownCmd(opts *localcluster.Options, asJSON *bool) *cobra.Command {
	var purge bool
	cmd := &cobra.Command{
		Use:   "down [--purge]",
		Short: "Stop the local servers; --purge also removes their data and the cluster file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := localcluster.Down(cmd.Context(), *opts, purge)
			if res != nil && *asJSON {
				if jerr := writeJSON(cmd.OutOrStdout(), res); jerr != nil {
					return jerr
				}
				return err
			}
			if res != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "stopped %d servers %s\n", len(res.Stopped), strings.Join(res.Stopped, " "))
				for _, r := range res.Removed {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", r)
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "also remove --dir and the cluster file up wrote")
	return cmd
}

func printLocalServers(out io.Writer, servers []localcluster.Server) {
	fmt.Fprintf(out, "%-6s %-6s %-8s %s\n", "NAME", "PORT", "STATE", "DATA")
	for _, s := range servers {
		state := "stopped"
		switch {
		case s.Created:
			state = "created"
		case s.Started:
			state = "started"
		case s.Running:
			state = "running"
		}
		fmt.Fprintf(out, "%-6s %-6d %-8s %s\n", s.Name, s.Port, state, s.Dir)
	}
}

package main

import (
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr"
)

// hostNames completes a host's name from the cluster file's hosts (the
// --config the command line gives, or its default): read from the file,
// with no database connection, so that a shell's TAB never waits on a
// server. Nothing is offered where the file cannot be read.
func hostNames(configPath *string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		f, err := os.Open(*configPath)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, shardmgr.MaxConfigSize+1))
		if err != nil || len(data) > shardmgr.MaxConfigSize {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// The names only: a ${VAR} the shell does not set is no reason
		// to offer none.
		cfg, err := shardmgr.ParseConfig(data, *configPath, func(string) (string, bool) { return "", true })
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, h := range cfg.Hosts {
			if strings.HasPrefix(h.Name, toComplete) {
				names = append(names, h.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// firstArgHostName is hostNames for a command whose first argument is a
// host's name (host drain, host remove, host set-dsn, host failover).
func firstArgHostName(configPath *string) cobra.CompletionFunc {
	names := hostNames(configPath)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(cmd, args, toComplete)
	}
}

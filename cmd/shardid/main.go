// Command shardid is the command-line face of the shardid toolkit: it parses
// flags, calls one package function and prints the typed result as text or
// JSON. Every behaviour lives in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/app/buildinfo"
)

// usageError marks errors in how the command was called: exit code 2.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitError carries an exit code without a message of its own, for commands
// that already printed their findings (verify: problems found is exit 1).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "shardid",
		Short: "Sharded, time-sortable 64-bit ids generated inside PostgreSQL",
		Long: `shardid installs a duplicate-proof id generator in every logical shard
(a PostgreSQL schema), manages which shard lives on which host, and proves that
the whole installation can only produce unique ids.

Run 'shardid demo' to see it work on local PostgreSQL servers it starts itself,
or 'shardid local up' for local servers and a cluster file that stay up, then
'shardid status'. The commands read the cluster file ./shardid.yaml (or
--config, or SHARDID_CONFIG); the README walks through them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Runnable, so that its Args (markUsageErrors) refuse an unknown
		// command; alone it prints its help, as a command group does.
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		Version: buildinfo.Read().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// Every command, in the order --help lists them (cobra adds completion
	// and help).
	root.AddCommand(
		newBenchCmd(),
		newCatalogCmd(),
		newConsoleCmd(),
		newDemoCmd(),
		newIDCmd(),
		newHostCmd(),
		newInitCmd(),
		newLocalCmd(),
		newMigrateCmd(),
		newRebalanceCmd(),
		newServeCmd(),
		newShardCmd(),
		newSQLCmd(),
		newStatusCmd(),
		newVerifyCmd(),
		newVersionCmd(),
	)
	markUsageErrors(root)
	return root
}

// markUsageErrors makes every argument error of the command tree a
// usageError (exit 2), by type rather than by cobra's wording: each
// command's Args validator is wrapped. A command without one gets what
// cobra would have used: the root refuses an unknown command, the others
// accept any arguments.
func markUsageErrors(c *cobra.Command) {
	args := c.Args
	if args == nil {
		if c.HasParent() {
			args = cobra.ArbitraryArgs
		} else {
			args = unknownCommand
		}
	}
	c.Args = func(cmd *cobra.Command, a []string) error {
		if err := args(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}

// unknownCommand is cobra's check for the root's arguments: none but a
// subcommand.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?"
		for _, x := range s {
			msg += "\n\t" + x
		}
	}
	return errors.New(msg)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "shardid: "+oneLine(errorWithHint(err)))
	if isUsageError(err) {
		return 2
	}
	return 1
}

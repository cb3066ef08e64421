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

	"github.com/shardid/shardid/internal/buildinfo"
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

Run 'shardid demo' to see it work on local PostgreSQL servers it starts itself.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, add := range commands {
		root.AddCommand(add())
	}
	return root
}

// commands collects the constructors of the top-level commands; each
// command file registers its own in an init function.
var commands []func() *cobra.Command

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
	fmt.Fprintln(os.Stderr, "shardid: "+oneLine(err.Error()))
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return 2
	}
	return 1
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Flag names mean one thing across the commands (issue 31): parallelism
// is --workers everywhere, --dsn is a DSN, --shards a list of shards,
// --to the host a shard goes to, --config a cluster file that is read.
// The spellings they replaced stay as deprecated aliases, since scripts
// and docs use them.

// aliasValue is an old spelling's value: setting it sets the new flag
// (marking it changed, so Changed, required and mutually exclusive checks
// see it) and says on stderr that the old spelling is deprecated.
type aliasValue struct {
	cmd       *cobra.Command
	fs        *pflag.FlagSet
	old, name string
	target    pflag.Value
}

func (a *aliasValue) String() string { return a.target.String() }
func (a *aliasValue) Type() string   { return a.target.Type() }
func (a *aliasValue) Set(v string) error {
	fmt.Fprintf(a.cmd.ErrOrStderr(), "Flag --%s has been deprecated, use --%s instead\n", a.old, a.name)
	return a.fs.Set(a.name, v)
}

// deprecatedAlias adds old to fs as a hidden spelling of the flag name
// (already in fs): it takes the same values, sets the same variable and
// says it is deprecated when used. cmd is the command whose stderr hears
// it.
func deprecatedAlias(cmd *cobra.Command, fs *pflag.FlagSet, name, old string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("deprecatedAlias: no flag --" + name)
	}
	fs.AddFlag(&pflag.Flag{
		Name:        old,
		Usage:       "deprecated: use --" + name,
		Value:       &aliasValue{cmd: cmd, fs: fs, old: old, name: name, target: f.Value},
		DefValue:    f.DefValue,
		NoOptDefVal: f.NoOptDefVal,
		Hidden:      true,
	})
}

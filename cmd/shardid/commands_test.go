package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// The command tree, in the order --help lists it, is what the root
// command builds: every command and subcommand a user relies on is there,
// none twice.
func TestCommandTree(t *testing.T) {
	var tree []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue // cobra's own
			}
			tree = append(tree, strings.TrimPrefix(sub.CommandPath(), "shardid "))
			walk(sub)
		}
	}
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root)
	require.Equal(t, []string{
		"bench", "bench schemes",
		"catalog", "catalog repair",
		"console",
		"demo",
		"host", "host drain", "host failover", "host list", "host remove", "host set-dsn",
		"id", "id decode", "id encode",
		"init",
		"local", "local add-host", "local down", "local remove-host", "local status", "local up",
		"migrate", "migrate down", "migrate generator", "migrate render", "migrate status", "migrate up",
		"rebalance", "rebalance abort", "rebalance apply", "rebalance cleanup", "rebalance plan", "rebalance status",
		"serve",
		"shard", "shard drop-stray", "shard move", "shard where",
		"sql", "sql function", "sql uuidv7",
		"status",
		"verify",
		"version",
	}, tree)

	out, err := runShardid(t, "--help")
	require.NoError(t, err)
	_, cmds, _ := strings.Cut(out, "Available Commands:\n")
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	var names []string
	for _, line := range strings.Split(cmds, "\n") {
		names = append(names, strings.Fields(line)[0])
	}
	require.Equal(t, []string{"bench", "catalog", "completion", "console", "demo", "help", "host", "id", "init", "local", "migrate",
		"rebalance", "serve", "shard", "sql", "status", "verify", "version"}, names)
}

// No command registers itself from an init function into a global list:
// the root command (main.go) names every command, so a reader finds the
// whole CLI in one place and a command file is plain code.
func TestNoInitFunctions(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s: func init: list the command in newRootCmd (main.go) instead", fset.Position(fn.Pos()))
			}
		}
	}
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/app/buildinfo"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print this binary's version and the schema versions it writes",
		Long: `Prints the module version (or "(devel)" with the VCS revision and time for a
build from a checkout), the Go version that built it, the catalog schema version
this binary migrates a catalog to, and the generator version it installs.
Connects to nothing. 'shardid --version' prints the first line alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, info)
			fmt.Fprintf(out, "catalog schema: %d\ngenerator:      v%d\n", info.CatalogSchema, info.Generator)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON")
	return cmd
}

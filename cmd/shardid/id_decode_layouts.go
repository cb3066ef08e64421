package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/internal/app/iddecode"
)

// layoutHelp lists the layouts `id decode --layout` reads, one a line.
func layoutHelp() string {
	var b strings.Builder
	for _, s := range idgen.Schemes() {
		fmt.Fprintf(&b, "  %-10s %s\n", s, idgen.AboutScheme(s))
	}
	return b.String()
}

// decodeOther is `id decode --layout L` for a layout other than the
// toolkit's own. Every id is read before anything is printed.
func decodeOther(cmd *cobra.Command, scheme string, epoch int64, asJSON bool, args []string) error {
	out, err := iddecode.DecodeOther(scheme, epoch, args)
	if err != nil {
		return usageError{err}
	}
	w := cmd.OutOrStdout()
	if asJSON {
		return writeJSON(w, out)
	}
	for _, d := range out {
		if _, err := fmt.Fprintln(w, d.String()); err != nil {
			return err
		}
	}
	return nil
}

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/shardid/shardid/shardmgr/rebalance"
)

// fixText is the way out of a failed preflight check, in the CLI's terms:
// the SQL (and whether the server must restart), the migrations, a
// table's own migration, or --mode offline.
func fixText(f *rebalance.Fix) string {
	if f == nil {
		return ""
	}
	var ways []string
	if f.SQL != "" {
		w := f.SQL
		if f.Restart {
			w += ", then restart the server"
		}
		ways = append(ways, w)
	}
	if f.Migrations {
		ways = append(ways, "pass the migrations directory the shards were migrated with (--dir DIR, or migrations: DIR in the cluster file)")
	}
	if f.Tables {
		ways = append(ways, "make the table in a migration (CREATE TABLE IF NOT EXISTS, then shardid migrate up) or move it out of the shard's schema")
	}
	if f.Offline {
		ways = append(ways, "--mode offline (or --mode auto: offline where online cannot run)")
	}
	return strings.Join(ways, "; or ")
}

// checkLine is one failed check on one line: host, setting, its value,
// the value needed and the way out.
func checkLine(c rebalance.Check) string {
	s := c.String()
	if fix := fixText(c.Fix); fix != "" {
		s += "; fix: " + fix
	}
	return s
}

// reportPreflight prints, when err is a failed preflight, one line per
// failed check on w and returns a short error for the last line; other
// errors come back as they are.
func reportPreflight(w io.Writer, err error) error {
	var pe *rebalance.PreflightError
	if !errors.As(err, &pe) {
		return err
	}
	for _, c := range pe.Failed {
		fmt.Fprintln(w, "preflight: "+checkLine(c))
	}
	n := "1 check"
	if len(pe.Failed) != 1 {
		n = fmt.Sprintf("%d checks", len(pe.Failed))
	}
	return fmt.Errorf("%w: %s failed (above); nothing was changed", rebalance.ErrPreflight, n)
}

// printPreflight prints the preflight's checks as a table.
func printPreflight(w io.Writer, checks []rebalance.Check) {
	if len(checks) == 0 {
		fmt.Fprintln(w, "preflight: no online moves, nothing to check")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tROLE\tCHECK\tVALUE\tNEED\tOK")
	for _, c := range checks {
		ok := "ok"
		if !c.OK {
			ok = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Host, c.Role, c.Setting, c.Value, c.Need, ok)
	}
	tw.Flush()
}

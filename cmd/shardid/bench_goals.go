package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/shardid/shardid/internal/app/genbench"
)

// printBenchGoals prints the run's ratios, each goal with whether the run
// met it: a missed goal says MISSED, not just the number beside the goal.
func printBenchGoals(w io.Writer, res *genbench.Result) {
	goals := res.Goals()
	fmt.Fprintf(w, "\nsafe is %.2fx faster than instagram (goal >= %gx: %s)\n", res.SafeSpeedup, genbench.GoalSafeSpeedup, verdict(goals[0].Met))
	more := res.MoreGoals()
	fmt.Fprintf(w, "safe costs %.2fx a bare nextval (goal <= %gx: %s)\n", res.SafeOverNextval, genbench.GoalOverNextval, verdict(more[0].Met))
	fmt.Fprintf(w, "bulk INSERT with the safe DEFAULT: %.2fx the bigserial time (goal <= %gx: %s); instagram DEFAULT: %.2fx\n",
		res.InsertRatio, genbench.GoalInsertRatio, verdict(goals[1].Met), res.InsertInstagramRatio)
	defer printIssueGoals(w, res)
	if len(res.Inserts) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsingle-row INSERTs, median of %d rounds\n", res.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "clients\tprotocol\tbigserial tps\tsafe DEFAULT tps\tsafe / bigserial\tgoal\n")
	for i, r := range res.Inserts {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%.2f %s\t%s\n", r.Clients, r.Protocol, median(r.SerialTPS), median(r.SafeTPS), r.Ratio, verdict(more[1+i].Met), more[1+i].Want)
	}
	tw.Flush()
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// printIssueGoals prints the generator's ratios for the PL/pgSQL form
// (the default) and the C one side by side, each against its own goal
// (issue 29's for PL/pgSQL, issue 21's for C) and whether the run met it.
func printIssueGoals(w io.Writer, res *genbench.Result) {
	c := "C (ext/shardid)"
	if !res.CGenerator {
		c = "C: not measured (the server does not offer the shardid extension: make ext)"
	}
	fmt.Fprintf(w, "\nthe generator against a sequence, PL/pgSQL (the default) and C side by side, each against its goal\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ratio\tPL/pgSQL\tgoal\t%s\tgoal\n", c)
	for _, r := range res.IssueGoals() {
		cell, want := "-", "-"
		if r.C != nil {
			cell, want = fmt.Sprintf("%.2fx %s", r.C.Value, verdict(r.C.Met)), r.C.Want
		}
		fmt.Fprintf(tw, "%s\t%.2fx %s\t%s\t%s\t%s\n", r.Name, r.PLpgSQL.Value, verdict(r.PLpgSQL.Met), r.PLpgSQL.Want, cell, want)
	}
	tw.Flush()
}

package main

import (
	"fmt"
	"io"

	"github.com/shardid/shardid/internal/app/genbench"
)

// printBenchGoals prints the run's ratios, each goal with whether the run
// met it: a missed goal says MISSED, not just the number beside the goal.
func printBenchGoals(w io.Writer, res *genbench.Result) {
	goals := res.Goals()
	fmt.Fprintf(w, "\nsafe is %.2fx faster than instagram (goal >= %gx: %s)\n", res.SafeSpeedup, genbench.GoalSafeSpeedup, verdict(goals[0].Met))
	fmt.Fprintf(w, "safe costs %.2fx a bare nextval\n", res.SafeOverNextval)
	fmt.Fprintf(w, "bulk INSERT with the safe DEFAULT: %.2fx the bigserial time (goal <= %gx: %s); instagram DEFAULT: %.2fx\n",
		res.InsertRatio, genbench.GoalInsertRatio, verdict(goals[1].Met), res.InsertInstagramRatio)
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

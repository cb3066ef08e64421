package charts

import (
	"fmt"
	"io"

	"github.com/shardid/shardid/internal/app/genbench"
)

// BenchSVG draws a genbench result: ids per second of each generator, and
// rows per second of the bulk INSERT into a bigserial table and with each
// generator as the id column's DEFAULT; each panel's title gives its ratio
// against the project's goal and says MISSED when the run misses it; the
// caption names the server, the run's size and the machine.
func BenchSVG(w io.Writer, r *genbench.Result) error {
	rate := func(name string) float64 {
		c := r.Case(name)
		if c.Median <= 0 {
			return 0
		}
		return float64(r.IDs) / c.Median.Seconds()
	}
	goals := r.Goals()
	machine := r.Machine
	if machine == "" {
		machine = "machine not recorded"
	}
	return WriteFigure(w, Figure{Caption: []string{
		fmt.Sprintf("PostgreSQL %s, %d ids per case, median of %d rounds, one session", r.Server, r.IDs, r.Rounds),
		machine,
	}, Panels: []Panel{
		{
			Title:  "ids per second, one session\n" + goalLine("safe vs instagram", goals[0]),
			YLabel: "ids per second",
			Bars: []Bar{
				{"nextval", rate(genbench.CaseNextval)},
				{"safe", rate(genbench.CaseSafe)},
				{"instagram", rate(genbench.CaseInstagram)},
			},
		},
		{
			Title:  "bulk INSERT, rows per second\n" + goalLine("safe DEFAULT time / bigserial", goals[1]),
			YLabel: "rows per second",
			Bars: []Bar{
				{"bigserial", rate(genbench.CaseInsertSerial)},
				{"safe DEFAULT", rate(genbench.CaseInsertSafe)},
				{"instagram DEFAULT", rate(genbench.CaseInsertInstagram)},
			},
		},
	}})
}

// goalLine is a panel's ratio against its goal: "safe vs instagram 3.92x (goal >= 2x)",
// or with MISSED when the run misses the goal.
func goalLine(what string, g genbench.Goal) string {
	s := fmt.Sprintf("%s %.2fx (goal %s)", what, g.Value, g.Want)
	if !g.Met {
		s += ": MISSED"
	}
	return s
}

package genbench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// The project's goals for the generator, as docs/benchmarks.md states them.
const (
	// GoalSafeSpeedup: the safe generator at least 2x as fast as
	// Instagram's function.
	GoalSafeSpeedup = 2.0
	// GoalInsertRatio: a bulk INSERT with the safe DEFAULT at most 1.15x
	// the time of the same INSERT into a bigserial table (issue 21; was
	// 1.5x).
	GoalInsertRatio = 1.15
	// GoalOverNextval: a million ids at most 1.5x a bare nextval's time.
	GoalOverNextval = 1.5
	// GoalSingleRow: single-row INSERTs through the DEFAULT at least
	// 0.95x bigserial's rate, for every client count and protocol.
	GoalSingleRow = 0.95
)

// Goal is one of the goals, against a run.
type Goal struct {
	// Name says what is compared, Value the run's ratio and Want the goal
	// ("at least 2x", "at most 1.5x"); Met says whether the run meets it.
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Want  string  `json:"want"`
	Met   bool    `json:"met"`
}

func (g Goal) String() string {
	verdict := "met"
	if !g.Met {
		verdict = "MISSED"
	}
	return fmt.Sprintf("%s: %.2fx (goal %s: %s)", g.Name, g.Value, g.Want, verdict)
}

// Goals are the run's ratios against the project's goals.
func (r *Result) Goals() []Goal {
	return []Goal{
		{Name: "safe over instagram, speed", Value: r.SafeSpeedup, Want: fmt.Sprintf(">= %gx", GoalSafeSpeedup), Met: r.SafeSpeedup >= GoalSafeSpeedup},
		{Name: "bulk INSERT, safe DEFAULT over bigserial, time", Value: r.InsertRatio, Want: fmt.Sprintf("<= %gx", GoalInsertRatio), Met: r.InsertRatio <= GoalInsertRatio},
	}
}

// MoreGoals are the run's ratios against the goals the charts do not
// draw: a million ids against a bare nextval, and each single-row INSERT
// case against bigserial.
func (r *Result) MoreGoals() []Goal {
	out := []Goal{{Name: "1 M ids, safe over bare nextval, time", Value: r.SafeOverNextval, Want: fmt.Sprintf("<= %gx", GoalOverNextval), Met: r.SafeOverNextval <= GoalOverNextval}}
	for _, in := range r.Inserts {
		out = append(out, Goal{Name: fmt.Sprintf("single-row INSERTs, %d clients, %s protocol, safe over bigserial, tps", in.Clients, in.Protocol),
			Value: in.Ratio, Want: fmt.Sprintf(">= %gx", GoalSingleRow), Met: in.Ratio >= GoalSingleRow})
	}
	return out
}

// Row is one goal measured for both generators, side by side: the
// PL/pgSQL one (the default) and, when the run measured it, the C one.
type Row struct {
	Name    string `json:"name"`
	Want    string `json:"want"`
	PLpgSQL Goal   `json:"plpgsql"`
	C       *Goal  `json:"c,omitempty"`
}

// IssueGoals are issue 21's three ratios, for each generator the run
// measured: a million ids against a bare nextval, a bulk INSERT against
// bigserial, and each single-row INSERT case against bigserial.
func (r *Result) IssueGoals() []Row {
	atMost := func(v, goal float64) Goal { return Goal{Value: v, Want: fmt.Sprintf("<= %gx", goal), Met: v <= goal} }
	atLeast := func(v, goal float64) Goal { return Goal{Value: v, Want: fmt.Sprintf(">= %gx", goal), Met: v >= goal} }
	row := func(name string, pl, c Goal) Row {
		pl.Name, c.Name = name+", PL/pgSQL", name+", C"
		out := Row{Name: name, Want: pl.Want, PLpgSQL: pl}
		if r.CGenerator {
			out.C = &c
		}
		return out
	}
	rows := []Row{
		row("1 M ids over bare nextval, time", atMost(r.SafeOverNextval, GoalOverNextval), atMost(r.COverNextval, GoalOverNextval)),
		row("bulk INSERT over bigserial, time", atMost(r.InsertRatio, GoalInsertRatio), atMost(r.InsertCRatio, GoalInsertRatio)),
	}
	for _, in := range r.Inserts {
		rows = append(rows, row(fmt.Sprintf("single-row INSERTs, %d clients, %s, over bigserial, tps", in.Clients, in.Protocol),
			atLeast(in.Ratio, GoalSingleRow), atLeast(in.CRatio, GoalSingleRow)))
	}
	return rows
}

// Machine describes the machine a run is on: OS and architecture, CPUs
// and their model when the system says (Linux's /proc/cpuinfo).
func Machine() string {
	s := fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if m := cpuModel(); m != "" {
		s += " (" + m + ")"
	}
	return s
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

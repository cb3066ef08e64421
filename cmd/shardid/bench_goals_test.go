package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/genbench"
)

// bench prints both forms of the generator and both protocols, each
// against its own goal: the PL/pgSQL default against issue 29's (1 M ids
// <= 2.5x nextval, bulk <= 1.3x, simple >= 0.85x, prepared >= 0.95x), C
// against issue 21's (1.5x, 1.15x, 0.95x), with met or MISSED beside every
// figure. The ratios below sit between the two forms' goals, so each
// verdict tells which goal was applied.
func TestBenchPrintsEachFormAgainstItsGoals(t *testing.T) {
	res := &genbench.Result{
		Rounds: 3, SafeSpeedup: 4, CGenerator: true,
		SafeOverNextval: 2.4, COverNextval: 1.6,
		InsertRatio: 1.2, InsertCRatio: 1.1,
		Inserts: []genbench.InsertRun{
			{Clients: 8, Protocol: genbench.ProtocolSimple, SerialTPS: []float64{100}, SafeTPS: []float64{86}, Ratio: 0.86, CTPS: []float64{94}, CRatio: 0.94},
			{Clients: 8, Protocol: genbench.ProtocolPrepared, SerialTPS: []float64{100}, SafeTPS: []float64{94}, Ratio: 0.94, CTPS: []float64{96}, CRatio: 0.96},
		},
	}
	var b bytes.Buffer
	printBenchGoals(&b, res)
	out := b.String()
	t.Log("\n" + out)
	row := func(prefix string) []string {
		re := regexp.MustCompile(`^` + prefix)
		for _, line := range strings.Split(out, "\n") {
			if re.MatchString(line) {
				return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
			}
		}
		t.Fatalf("no line matches %q", prefix)
		return nil
	}
	require.Equal(t, []string{"ratio", "PL/pgSQL", "goal", "C (ext/shardid)", "goal"}, row("ratio"))
	require.Equal(t, []string{"1 M ids over bare nextval, time", "2.40x met", "<= 2.5x", "1.60x MISSED", "<= 1.5x"}, row("1 M ids"))
	require.Equal(t, []string{"bulk INSERT over bigserial, time", "1.20x met", "<= 1.3x", "1.10x met", "<= 1.15x"}, row("bulk INSERT over"))
	require.Equal(t, []string{"single-row INSERTs, 8 clients, simple protocol, over bigserial, tps", "0.86x met", ">= 0.85x", "0.94x MISSED", ">= 0.95x"},
		row("single-row INSERTs, 8 clients, simple"))
	require.Equal(t, []string{"single-row INSERTs, 8 clients, prepared protocol, over bigserial, tps", "0.94x MISSED", ">= 0.95x", "0.96x met", ">= 0.95x"},
		row("single-row INSERTs, 8 clients, prepared"))
	// The lines above the table say the same of the default.
	require.Contains(t, out, "safe costs 2.40x a bare nextval (goal <= 2.5x: met)")
	require.Contains(t, out, "bulk INSERT with the safe DEFAULT: 1.20x the bigserial time (goal <= 1.3x: met)")
	require.Equal(t, []string{"8", "simple", "100", "86", "0.86 met", ">= 0.85x"}, row(`8\s+simple`))
	require.Equal(t, []string{"8", "prepared", "100", "94", "0.94 MISSED", ">= 0.95x"}, row(`8\s+prepared`))
}

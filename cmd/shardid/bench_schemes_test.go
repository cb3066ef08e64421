package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/schemebench"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// bench schemes without a terminal prints a line per step on stderr,
// counted against the whole run, and a last line; stdout keeps the table.
func TestBenchSchemesPrintsProgressLines(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"bench", "schemes", "--dsn", dsn, "--rows", "2000", "--rounds", "1", "--go-duration", "20ms"})
	require.NoError(t, root.ExecuteContext(ctx), errOut.String())
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	// 18 steps; 19 on PostgreSQL 18, whose built-in uuidv7() is one more
	// case (scripts/test-versions).
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	var version int
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version))
	conn.Close(ctx)
	n := 18
	if version >= 180000 {
		n = 19
	}
	// The seconds are the machine's: a loaded one takes a second or more
	// to reach the first step.
	require.Regexp(t, fmt.Sprintf(`^bench schemes: \[1/%d\] making keys \(\d+s so far\)$`, n), lines[0])
	require.Regexp(t, fmt.Sprintf(`^bench schemes: \[2/%d\] round 1/1: nextval \(bigserial\) \(\d+s so far\)$`, n), lines[1])
	require.Regexp(t, fmt.Sprintf(`^bench schemes: \[%d/%d\] round 1/1: insert random UUIDv4, keys made beforehand `, n, n), lines[n-1])
	require.Regexp(t, `^bench schemes: done in \d+s$`, lines[n])
	require.Len(t, lines, n+1)
	require.Contains(t, out.String(), "bulk INSERT, key")
	require.NotContains(t, out.String(), "bench schemes:")
}

// On a terminal the steps are one bar, with the case and the time spent.
func TestBenchSchemesProgressBar(t *testing.T) {
	var w bytes.Buffer
	p := newSchemesProgress(&w, true)
	p.step(schemebench.Step{Round: 0, Rounds: 3, Case: "making keys", Done: 0, Total: 52})
	p.step(schemebench.Step{Round: 2, Rounds: 3, Case: "safe generator", Done: 20, Total: 52})
	time.Sleep(300 * time.Millisecond) // a refresh
	p.done(nil)
	// The width of the screen decides how much of the case shows.
	require.Regexp(t, regexp.MustCompile(`bench schemes .*20/52 round 2/3`), w.String())
}

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// repeatedPart is the first part of an error line (the text between its
// ": " separators) that the line says twice, as in "host pg2: host pg2:
// read schema version" or "read FILE: read FILE: is a directory", a wrap
// that adds what the wrapped error already says; "" when none repeats.
func repeatedPart(line string) string {
	seen := map[string]bool{}
	for _, part := range strings.Split(line, ": ") {
		part = strings.TrimSpace(part)
		if len(part) < 4 {
			continue
		}
		if seen[part] {
			return part
		}
		seen[part] = true
	}
	return ""
}

// requireNoRepeatedPart fails the test when a line of msg says a part twice.
func requireNoRepeatedPart(t *testing.T, msg string) {
	t.Helper()
	for _, line := range strings.Split(msg, "\n") {
		require.Empty(t, repeatedPart(line), "a part said twice in %q", line)
	}
}

func TestRepeatedPart(t *testing.T) {
	for line, want := range map[string]string{
		"host pg2: host pg2: read schema version: ERROR": "host pg2",
		"read /tmp/x: read /tmp/x: is a directory":       "read /tmp/x",
		"host pg2: read schema version: ERROR: boom":     "",
		"shard 3 on pg1: shard 3: no":                    "",
	} {
		require.Equal(t, want, repeatedPart(line), line)
	}
}

// Issue 30 §4: the commands that said a part twice ("read FILE: read
// FILE: is a directory", "host pg2: host pg2: read schema version") say it
// once.
func TestErrorsSayEachPartOnce(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"status"}, {"init"}, {"verify"}, {"host", "list"}} {
		out, code := runClusterCmd(t, append(args, "--config", dir)...)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, dir+": is a directory")
		requireNoRepeatedPart(t, out)
	}

	// A host whose version table the toolkit cannot read.
	path, dsns := clusterFile(t, 4)
	conn := pgtest.Pool(t, dsns[1])
	_, err := conn.Exec(context.Background(), `CREATE SCHEMA shardid; CREATE TABLE shardid.host_migrations (v int)`)
	require.NoError(t, err)
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "host pg2: read schema version")
	requireNoRepeatedPart(t, out)
}

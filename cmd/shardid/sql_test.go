package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sql function refuses what the cluster file refuses: one line, exit 2,
// no SQL printed.
func TestSQLFunctionBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"largest epoch", []string{"--epoch", "9223372036854775807"}, "is in the future"},
		{"future epoch", []string{"--epoch", "99999999999999"}, "epoch 99999999999999 is in the future"},
		{"negative epoch", []string{"--epoch", "-1"}, "is negative"},
		{"pg_catalog", []string{"--schema", "pg_catalog"}, `"pg_catalog" is reserved`},
		{"information_schema", []string{"--schema", "information_schema"}, `"information_schema" is reserved`},
		{"pg_ prefix", []string{"--schema", "pg_ids"}, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runShardid(t, append([]string{"sql", "function", "--shard", "5"}, tc.args...)...)
			require.Error(t, err)
			require.Empty(t, out)
			require.Contains(t, err.Error(), tc.msg)
			require.Equal(t, err.Error(), oneLine(err.Error()))
			var ue usageError
			require.True(t, errors.As(err, &ue))
			require.Equal(t, 2, exitCode(err))
		})
	}
}

// A cluster file that never ends (/dev/zero) is one error line and exit
// 1, not an out-of-memory death.
func TestConfigDevZero(t *testing.T) {
	for _, args := range [][]string{{"status"}, {"verify"}, {"init"}} {
		out, code := runClusterCmd(t, append(args, "--config", "/dev/zero")...)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "/dev/zero: file too large: more than 1 MiB")
		require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, out)
	}
}

// Issue 18, item 12: what sql function prints for psql is one transaction,
// so under psql's autocommit next_id_advance is never visible, and
// executable by PUBLIC, before its REVOKE (sql.TestScriptIsOneTransaction
// runs it).
func TestSQLFunctionIsOneTransaction(t *testing.T) {
	out, err := runShardid(t, "sql", "function", "--shard", "5")
	require.NoError(t, err)
	begin := strings.Index(out, "\nBEGIN;\n")
	require.GreaterOrEqual(t, begin, 0, "a BEGIN")
	require.Less(t, begin, strings.Index(out, "CREATE "), "before the first CREATE")
	require.Less(t, strings.Index(out, "CREATE OR REPLACE FUNCTION shard_0005.next_id_advance"), strings.Index(out, "REVOKE ALL ON FUNCTION shard_0005.next_id_advance"))
	require.True(t, strings.HasSuffix(out, "\nCOMMIT;\n"), "a COMMIT last")
	require.Equal(t, 1, strings.Count(out, "\nBEGIN;\n"))
	require.Equal(t, 1, strings.Count(out, "COMMIT;"))
}

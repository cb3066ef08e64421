package sql_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// Issue 30 §4: `shardid sql function | psql` printed "NOTICE: function
// shard_0005.next_id_advance(pg_catalog.int8) does not exist, skipping" on
// a fresh database, a line a DBA reads as a problem. psql writes notices to
// stderr: on a fresh database, and when the script runs again, stderr stays
// empty.
func TestSQLScriptPrintsNoNotice(t *testing.T) {
	for _, gen := range []string{shsql.GeneratorPLpgSQL, ""} {
		p := shsql.Params{Shard: 5, Generator: gen}
		if gen == "" {
			p = shsql.Params{Shard: 6, Variant: shsql.Instagram}
		}
		ddl, err := shsql.RenderScript(p)
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "shard.sql")
		require.NoError(t, os.WriteFile(file, []byte(ddl), 0o644))
		psql := pgtest.Psql(t)
		dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
		for run := range 2 {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=1", "-f", file, dsn)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "%s%s", stdout.String(), stderr.String())
			require.Empty(t, stderr.String(), "run %d of %+v prints nothing on stderr", run+1, p)
		}
	}
}

// `shardid sql uuidv7 | psql` printed "NOTICE: schema "public" already
// exists, skipping" on every database (public is there from the start), and
// on a rerun into a schema of its own: both runs, into public and into a
// new schema, print nothing on stderr.
func TestUUIDv7ScriptPrintsNoNotice(t *testing.T) {
	psql := pgtest.Psql(t)
	server := pgtest.Servers(t, 1)[0]
	for _, schema := range []string{"", "ids"} {
		ddl, err := shsql.RenderUUIDv7(schema)
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "uuidv7.sql")
		require.NoError(t, os.WriteFile(file, []byte(ddl), 0o644))
		dsn := pgtest.NewDB(t, server)
		for run := range 2 {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=1", "-f", file, dsn)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "%s%s", stdout.String(), stderr.String())
			require.Empty(t, stderr.String(), "run %d into schema %q prints nothing on stderr", run+1, schema)
		}
	}
}

package clustertest

import (
	"bytes"
	"context"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// AsPostgres runs the PostgreSQL client program name (pg_dump,
// pg_restore, ...) that pgtest.Tool chooses for the servers' major as the
// postgres user, with stdin, and returns its output; a failure fails t
// with its stderr. Where no such program of a fitting major is here (a
// bundle of 16 to 18, SHARDID_PG_BIN), t is skipped, naming it.
func AsPostgres(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	tool := pgtest.Tool(t, name)
	u, err := user.Lookup("postgres")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	ctx, cancel := context.WithTimeout(Ctx(t), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	require.NoError(t, cmd.Run(), "%s: %s", name, errOut.String())
	return out.Bytes()
}

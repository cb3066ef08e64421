package clustertest

import (
	"bytes"
	"context"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
)

// AsPostgres runs the PostgreSQL client program name (pg_dump,
// pg_restore, ...) of the system's binaries as the postgres user, with
// stdin, and returns its output; a failure fails t with its stderr.
func AsPostgres(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	bin, err := localpg.FindBinDir()
	require.NoError(t, err)
	u, err := user.Lookup("postgres")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	ctx, cancel := context.WithTimeout(Ctx(t), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	require.NoError(t, cmd.Run(), "%s: %s", name, errOut.String())
	return out.Bytes()
}

package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewAsyncStandby makes an asynchronous streaming standby of s, as an
// operator would: pg_basebackup -R (a standby.signal and primary_conninfo
// pointing at s) into a new data directory, started on a free port with
// s's settings. Where s's binaries have no pg_basebackup (a bundle of
// another major, SHARDID_PG_BIN), the data directory is copied between
// pg_backup_start and pg_backup_stop instead (copyBaseBackup). env is
// extra environment for the standby's postgres, for example
// libfaketime's (FaketimeEnv) to run it with its clock behind s's. It returns once the standby accepts connections; Stop removes it,
// Promote makes it a primary.
func (s *Server) NewAsyncStandby(ctx context.Context, env ...string) (*Server, error) {
	_, err := os.Stat(filepath.Join(s.bin, "pg_basebackup"))
	return s.newAsyncStandby(ctx, err == nil, env)
}

func (s *Server) newAsyncStandby(ctx context.Context, basebackup bool, env []string) (*Server, error) {
	dir, err := os.MkdirTemp("", "shardid-pgstandby-")
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	st := &Server{Dir: dir, bin: s.bin, cred: s.cred, opts: s.opts, logPath: filepath.Join(dir, "server.log"), env: env}
	st.opts.OwnSystemID = false // a copy of s's data directory: s's system identifier
	if err := st.chown(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if basebackup {
		out, err := st.command(ctx, "pg_basebackup", "-D", filepath.Join(dir, "data"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
			"-U", "postgres", "-R", "-X", "stream", "-c", "fast", "--no-sync").CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("localpg: pg_basebackup from port %d: %v: %s", s.Port, err, out)
		}
	} else if err := s.copyBaseBackup(ctx, filepath.Join(dir, "data")); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("localpg: %w", err)
	}
	for attempt := 0; ; attempt++ {
		if st.Port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err = st.start(ctx); err == nil {
			return st, nil
		}
		if attempt >= 3 || !strings.Contains(st.logTail(), "could not bind") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// FaketimeEnv is the environment that runs a program under libfaketime
// with its wall clock offset by offset (negative: behind), its monotonic
// clock left alone. It fails when libfaketime is not installed
// (scripts/ensure-faketime installs it).
func FaketimeEnv(offset time.Duration) ([]string, error) {
	libs, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	libs2, _ := filepath.Glob("/usr/lib/faketime/libfaketime.so.1")
	libs = append(libs, libs2...)
	if len(libs) == 0 {
		return nil, errors.New("localpg: libfaketime not found (run scripts/ensure-faketime, or apt-get install libfaketime)")
	}
	return []string{"LD_PRELOAD=" + libs[0], fmt.Sprintf("FAKETIME=%+ds", int64(offset/time.Second)), "FAKETIME_DONT_FAKE_MONOTONIC=1"}, nil
}

// KillHard kills the server and every backend with SIGKILL (kill -9):
// no shutdown checkpoint, nothing more sent to its standbys. The data
// directory stays until Stop.
func (s *Server) KillHard() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.kill()
}

// FreezeWALSenders stops (SIGSTOP) every WAL sender process of s, so
// that what s commits from now on reaches no standby, and returns their
// process ids. KillHard kills them with the rest.
func (s *Server) FreezeWALSenders(ctx context.Context) ([]int, error) {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_catalog.pg_stat_replication`)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, errors.New("localpg: no WAL sender to freeze")
	}
	var out []int
	for _, p := range pids {
		if err := syscall.Kill(int(p), syscall.SIGSTOP); err != nil {
			return out, fmt.Errorf("localpg: SIGSTOP WAL sender %d: %w", p, err)
		}
		out = append(out, int(p))
	}
	return out, nil
}

// FreezeBackends stops (SIGSTOP) every process of s whose
// pg_stat_activity.backend_type is backendType ("logical replication
// launcher", say), so that it does nothing until Thaw, and returns their
// process ids. Thaw them before Stop: a stopped child holds up the
// server's shutdown.
func (s *Server) FreezeBackends(ctx context.Context, backendType string) ([]int, error) {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_catalog.pg_stat_activity WHERE backend_type = $1`, backendType)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("localpg: no %s to freeze", backendType)
	}
	var out []int
	for _, p := range pids {
		if err := syscall.Kill(int(p), syscall.SIGSTOP); err != nil {
			return out, fmt.Errorf("localpg: SIGSTOP %s %d: %w", backendType, p, err)
		}
		out = append(out, int(p))
	}
	return out, nil
}

// Thaw resumes (SIGCONT) the processes FreezeBackends stopped.
func Thaw(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
}

// WaitReplayed waits, at most timeout, until standby st has replayed
// everything s has written so far.
func (s *Server) WaitReplayed(ctx context.Context, st *Server, timeout time.Duration) error {
	pc, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer pc.Close(ctx)
	var lsn string
	if err := pc.QueryRow(ctx, `SELECT pg_catalog.pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		return err
	}
	sc, err := pgx.Connect(ctx, st.DSN("postgres"))
	if err != nil {
		return err
	}
	defer sc.Close(ctx)
	deadline := time.Now().Add(timeout)
	for {
		var done bool
		if err := sc.QueryRow(ctx, `SELECT pg_catalog.pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localpg: the standby on port %d did not replay up to %s within %s", st.Port, lsn, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Promote ends a standby's recovery (pg_promote) and waits, at most
// timeout, until it accepts writes.
func (s *Server) Promote(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("localpg: promote: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	secs := max(int(timeout.Seconds()), 1)
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_promote(true, $1)`, secs).Scan(&ok); err != nil {
		return fmt.Errorf("localpg: promote: %w", err)
	}
	if !ok {
		return fmt.Errorf("localpg: promote: the server on port %d did not leave recovery within %s", s.Port, timeout)
	}
	return nil
}

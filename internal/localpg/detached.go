package localpg

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// confName is the file in a detached server's data directory that holds
// the settings localpg gives it; postgresql.conf includes it.
const confName = "localpg.conf"

// StartDetached initialises a server in dir (created if missing; it must
// not hold a server yet) and starts it so that it outlives this process:
// it runs in a session of its own, the kernel does not kill it with its
// parent, and its settings, port included, are written into its data
// directory. Open finds it again from dir, in this process or another;
// Halt stops it and keeps its data, Restart starts it again, Stop also
// removes dir.
func StartDetached(ctx context.Context, dir string, opts Options) (*Server, error) {
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		return nil, fmt.Errorf("localpg: %s already holds a server (use Open)", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	s := &Server{Dir: dir, bin: bin, cred: cred, opts: opts, logPath: filepath.Join(dir, "server.log"), detached: true}
	if err := s.chown(dir); err != nil {
		return nil, err
	}
	if err := reachable(dir, cred); err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(filepath.Join(dir, "data"))
		return nil, err
	}
	if err := s.initdb(ctx); err != nil {
		return fail(err)
	}
	for attempt := 0; ; attempt++ {
		if s.Port, err = freePort(); err != nil {
			return fail(err)
		}
		if err := s.writeConf(); err != nil {
			return fail(err)
		}
		err = s.start(ctx)
		if err == nil {
			return s, nil
		}
		if attempt >= 3 || !strings.Contains(s.logTail(), "could not bind") {
			return fail(err)
		}
	}
}

// writeConf writes the server's settings into its data directory and has
// postgresql.conf include them (once).
func (s *Server) writeConf() error {
	data := filepath.Join(s.Dir, "data")
	keys, values := s.settings()
	var b strings.Builder
	b.WriteString("# Written by shardid's localpg; postgresql.conf includes this file.\n")
	for _, k := range keys {
		v := values[k]
		if !strings.HasPrefix(v, "'") {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				v = "'" + v + "'"
			}
		}
		fmt.Fprintf(&b, "%s = %s\n", k, v)
	}
	if err := os.WriteFile(filepath.Join(data, confName), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	main := filepath.Join(data, "postgresql.conf")
	cur, err := os.ReadFile(main)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	include := "include_if_exists = '" + confName + "'\n"
	if !strings.Contains(string(cur), include) {
		if err := os.WriteFile(main, append(cur, "\n"+include...), 0o600); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
	}
	return s.chown(data)
}

// ErrNoServer is returned by Open for a directory that holds no server.
var ErrNoServer = errors.New("localpg: no server in this directory")

// Open finds the detached server in dir, running or not (see Running).
// opts.BinDir says which binaries Restart uses; the rest of opts is
// ignored: the server keeps the settings it was created with.
func Open(dir string, opts Options) (*Server, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "data", confName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoServer, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	bin := opts.BinDir
	if bin == "" {
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, cred: cred, opts: opts, logPath: filepath.Join(dir, "server.log"), detached: true}
	sc := bufio.NewScanner(strings.NewReader(string(conf)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.TrimSpace(k) == "port" {
			s.Port, _ = strconv.Atoi(strings.Trim(strings.TrimSpace(v), "'"))
		}
	}
	if s.Port == 0 {
		return nil, fmt.Errorf("localpg: %s: no port in %s", dir, confName)
	}
	return s, nil
}

// PID returns the process id of the server's postmaster and whether it is
// running, from the postmaster.pid file PostgreSQL keeps in its data
// directory while it runs.
func (s *Server) PID() (int, bool) {
	b, err := os.ReadFile(filepath.Join(s.Dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, alive(pid)
}

// Running reports whether the server's postmaster is running.
func (s *Server) Running() bool {
	_, ok := s.PID()
	return ok
}

// signalPID signals a detached server this process did not start and
// waits until it is gone.
func (s *Server) signalPID(sig syscall.Signal) error {
	pid, ok := s.PID()
	if !ok {
		return nil
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("localpg: signal server %d: %w", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // its session's process group
	return fmt.Errorf("localpg: server %d did not stop within 30s; killed", pid)
}

// alive reports whether process pid exists and is not a zombie (a server
// whose parent died is reaped by whoever adopted it, perhaps never).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: trust kill
	}
	_, rest, ok := strings.Cut(string(stat), ") ")
	return !ok || (rest[0] != 'Z' && rest[0] != 'X')
}

// reachable checks that the user the server runs as can reach dir: as
// root the server runs as postgres, which cannot enter a directory under,
// say, a home directory of mode 0700.
func reachable(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		mode := st.Mode().Perm()
		if ok {
			can := mode&0o001 != 0 ||
				(sys.Uid == cred.Uid && mode&0o100 != 0) ||
				(sys.Gid == cred.Gid && mode&0o010 != 0)
			if !can {
				return fmt.Errorf("localpg: the server runs as user postgres, which cannot enter %s (mode %o): choose a directory it can reach, or chmod o+x %s", d, mode, d)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

package localpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options adjusts a server before it starts. The zero value is a sensible
// throwaway server: fast settings, logical WAL, a free loopback port.
type Options struct {
	// BinDir holds initdb and postgres. Empty means FindBinDir's choice.
	BinDir string
	// Settings are extra postgresql.conf settings (name -> value), applied
	// after the defaults so they can override them.
	Settings map[string]string
	// StartTimeout bounds how long Start waits for the server to accept
	// connections. Zero means 2 minutes: a bound on a hang, which a server
	// starting on a loaded machine (tests on 2 cores at a load average of
	// 20 and more) must not reach.
	StartTimeout time.Duration
	// OwnSystemID runs initdb for this server alone, so that it gets a
	// system identifier of its own; otherwise the data directory is a copy
	// of a cached one, and every such server shares one identifier, as a
	// primary and its standbys do (see standby.go).
	OwnSystemID bool
	// Env is extra environment for initdb and postgres (FaketimeEnv, to
	// run the server's clock off the machine's).
	Env []string
}

// Server is one running PostgreSQL server owned by this process.
type Server struct {
	// Port is the loopback TCP port the server listens on.
	Port int
	// Dir is the data directory, removed by Stop.
	Dir string

	bin     string
	logPath string
	cred    *syscall.Credential
	opts    Options

	// detached servers outlive this process (StartDetached, Open).
	detached bool
	// env is extra environment for postgres (a standby's libfaketime:
	// standby.go).
	env []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// The defaults trade durability for speed: these servers hold test data
// only. synchronous_commit stays on so that an immediate shutdown (our
// "crash") keeps every committed transaction, as a real server would.
var defaultSettings = map[string]string{
	"fsync":                           "off",
	"full_page_writes":                "off",
	"wal_level":                       "logical",
	"max_wal_senders":                 "20",
	"max_replication_slots":           "20",
	"max_logical_replication_workers": "16",
	// Room for the logical workers above, the launcher and parallel
	// queries: a move's preflight counts what is free, and the tests of a
	// package share these servers.
	"max_worker_processes":      "24",
	"max_connections":           "300",
	"shared_buffers":            "128MB",
	"listen_addresses":          "'127.0.0.1'",
	"unix_socket_directories":   "''",
	"log_min_messages":          "warning",
	"logging_collector":         "off",
	"timezone":                  "'UTC'",
	"max_locks_per_transaction": "256",
}

// BinEnv names the environment variable that chooses the PostgreSQL
// binaries every local server starts from (scripts/test-versions sets it
// to one major's bundle from scripts/ensure-pg-bundles).
const BinEnv = "SHARDID_PG_BIN"

// FindBinDir returns the directory holding initdb and postgres: $SHARDID_PG_BIN
// when it is set (an error when it lacks either), else that of initdb on
// PATH, else the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		for _, name := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return "", fmt.Errorf("localpg: %s=%s has no %s", BinEnv, dir, name)
			}
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("localpg: PostgreSQL binaries not found (no initdb on PATH or in /usr/lib/postgresql/*/bin); install the Debian package postgresql")
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// Start creates a fresh data directory, initialises it and starts a server
// on a free loopback port. When the caller is root, initdb and postgres run
// as the "postgres" user, since both refuse to run as root.
func Start(ctx context.Context, opts Options) (*Server, error) {
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
	dir, err := os.MkdirTemp("", "shardid-pg-")
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	s := &Server{Dir: dir, bin: bin, cred: cred, opts: opts, logPath: filepath.Join(dir, "server.log"), env: opts.Env}
	if err := s.chown(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.initdb(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A port picked now may be taken before the server binds it; try a few.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.Port = port
		err = s.start(ctx)
		if err == nil {
			return s, nil
		}
		if attempt >= 3 || !strings.Contains(s.logTail(), "could not bind") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// credential returns the user to run PostgreSQL as: nil (ourselves) unless
// we are root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("localpg: running as root and there is no 'postgres' user to run the server as (install the Debian package postgresql)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	return filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(s.cred.Uid), int(s.cred.Gid))
	})
}

func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	// A clean environment: PG* variables of the caller must not steer initdb.
	cmd.Env = append([]string{"LC_ALL=C.UTF-8", "LANG=C.UTF-8", "PATH=" + os.Getenv("PATH")}, s.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	if s.detached {
		// A session of its own: no terminal's or process group's signal
		// (^C in the shell that ran `shardid local up`) reaches it.
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid = false, true
	}
	return cmd
}

// initTemplates caches one initdb per binary directory: copying a data
// directory is much faster than running initdb for every server.
var initTemplates sync.Map // bin dir -> *template

type template struct {
	once sync.Once
	dir  string
	err  error
}

func (s *Server) initdb(ctx context.Context) error {
	if s.opts.OwnSystemID {
		return s.initdbAlone(ctx)
	}
	v, _ := initTemplates.LoadOrStore(s.bin, &template{})
	t := v.(*template)
	t.once.Do(func() {
		tmp := &Server{bin: s.bin, cred: s.cred}
		tmp.Dir, t.err = os.MkdirTemp("", "shardid-pgtemplate-")
		if t.err != nil {
			return
		}
		if t.err = tmp.chown(tmp.Dir); t.err != nil {
			return
		}
		t.dir = filepath.Join(tmp.Dir, "data")
		out, err := tmp.command(context.WithoutCancel(ctx), "initdb", "-D", t.dir, "-U", "postgres",
			"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync").CombinedOutput()
		if err != nil {
			t.err = fmt.Errorf("localpg: initdb failed: %v\n%s", err, out)
		}
	})
	if t.err != nil {
		return t.err
	}
	data := filepath.Join(s.Dir, "data")
	if out, err := exec.CommandContext(ctx, "cp", "-a", t.dir, data).CombinedOutput(); err != nil {
		return fmt.Errorf("localpg: copy data directory: %v: %s", err, out)
	}
	return nil
}

// RemoveTemplates deletes the cached initdb directories; call it when the
// process is done with local servers (tests' TestMain, the demo).
func RemoveTemplates() {
	initTemplates.Range(func(k, v any) bool {
		if t := v.(*template); t.dir != "" {
			os.RemoveAll(filepath.Dir(t.dir))
		}
		initTemplates.Delete(k)
		return true
	})
}

// settings are the defaults, then the caller's, then the port, in name
// order.
func (s *Server) settings() (keys []string, values map[string]string) {
	values = map[string]string{}
	for k, v := range defaultSettings {
		values[k] = v
	}
	for k, v := range s.opts.Settings {
		values[k] = v
	}
	values["port"] = strconv.Itoa(s.Port)
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, values
}

func (s *Server) start(ctx context.Context) error {
	args := []string{"-D", filepath.Join(s.Dir, "data")}
	if !s.detached {
		// A detached server reads its settings from its data directory
		// (writeConf), so that another process restarts it as it was.
		keys, settings := s.settings()
		for _, k := range keys {
			args = append(args, "-c", k+"="+strings.Trim(settings[k], "'"))
		}
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	// The server must outlive ctx (ctx bounds only the start), so it is
	// not started with exec.CommandContext.
	cmd := s.command(context.Background(), "postgres", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if !s.detached {
		dieWithParent(cmd)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("localpg: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.stopped = cmd, exited, false
	s.mu.Unlock()

	timeout := s.opts.StartTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("localpg: postgres exited during start; server log:\n%s", s.logTail())
		case <-ctx.Done():
			s.kill()
			return fmt.Errorf("localpg: postgres did not accept connections within %s: %v; server log:\n%s", timeout, err, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// LogPath is the file the server writes its log to (stderr and stdout),
// kept with the data directory.
func (s *Server) LogPath() string { return s.logPath }

// DSN returns a connection string for database db as user postgres.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// CreateDatabase creates database name (it must not exist) and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("localpg: create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// Crash stops the server the way a power cut would look to PostgreSQL:
// an immediate shutdown, with crash recovery on the next Restart.
func (s *Server) Crash() error { return s.signal(syscall.SIGQUIT) }

// Halt stops the server cleanly (fast shutdown) and keeps its data
// directory, so that Restart can bring it back.
func (s *Server) Halt() error { return s.signal(syscall.SIGINT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil {
		if s.detached {
			// Started by another process: found by its postmaster.pid.
			return s.signalPID(sig)
		}
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		s.kill()
		return errors.New("localpg: server did not stop within 30s; killed")
	}
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// Restart starts a halted or crashed server again on the same port and
// data; for a server found by Open, it starts the stopped server.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited != nil {
		select {
		case <-exited:
		default:
			return errors.New("localpg: Restart: server is still running")
		}
	}
	if s.detached && s.Running() {
		return errors.New("localpg: Restart: server is still running")
	}
	return s.start(ctx)
}

// Set changes setting name for the next Restart, as an operator's ALTER
// SYSTEM would (the server is started with its settings on the command
// line, which ALTER SYSTEM does not override).
func (s *Server) Set(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	settings := map[string]string{name: value}
	for k, v := range s.opts.Settings {
		if k != name {
			settings[k] = v
		}
	}
	s.opts.Settings = settings
}

// Stop shuts the server down and removes its data directory.
func (s *Server) Stop() error {
	err := s.signal(syscall.SIGINT)
	if rerr := os.RemoveAll(s.Dir); err == nil {
		err = rerr
	}
	return err
}

// StartN starts n servers in parallel; on error, those started are stopped.
func StartN(ctx context.Context, n int, opts Options) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = Start(ctx, opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range servers {
			if s != nil {
				s.Stop()
			}
		}
		return nil, err
	}
	return servers, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// initdbAlone runs initdb into this server's data directory (Options.OwnSystemID).
func (s *Server) initdbAlone(ctx context.Context) error {
	out, err := s.command(ctx, "initdb", "-D", filepath.Join(s.Dir, "data"), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync").CombinedOutput()
	if err != nil {
		return errors.Join(fmt.Errorf("localpg: initdb failed: %v", err), errors.New(string(out)))
	}
	return nil
}

package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pool modes of PgBouncer (its pool_mode setting).
const (
	PoolTransaction = "transaction"
	PoolSession     = "session"
)

// BouncerOptions adjusts a PgBouncer before it starts.
type BouncerOptions struct {
	// PoolMode is pool_mode: PoolTransaction (the zero value) or
	// PoolSession.
	PoolMode string
	// PoolSize is default_pool_size, the server connections per
	// database and user; zero means 20.
	PoolSize int
	// Users may connect besides postgres (auth_type trust still needs a
	// user in the auth file).
	Users []string
	// IgnoreStartupParameters is PgBouncer's ignore_startup_parameters:
	// startup parameters it accepts from clients and drops.
	IgnoreStartupParameters []string
}

// Bouncer is one PgBouncer owned by this process, in front of one Server:
// every database of the server, under the same name.
type Bouncer struct {
	// Port is the loopback TCP port PgBouncer listens on.
	Port int
	// Dir holds its configuration, auth file and log; removed by Stop.
	Dir string

	server *Server
	log    string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// FindPgBouncer returns the path of the pgbouncer binary: on PATH, else
// Debian's /usr/sbin/pgbouncer.
func FindPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("localpg: pgbouncer not found (run scripts/ensure-pgbouncer, or apt-get install pgbouncer)")
}

// StartPgBouncer starts a PgBouncer in front of s, listening on a free
// loopback port, with trust authentication; as root it runs as the
// postgres user, as the server does (PgBouncer refuses root). It dies with
// this process; Stop ends it and removes its directory.
func (s *Server) StartPgBouncer(ctx context.Context, opts BouncerOptions) (*Bouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	if opts.PoolMode == "" {
		opts.PoolMode = PoolTransaction
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 20
	}
	dir, err := os.MkdirTemp("", "shardid-pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	b := &Bouncer{Dir: dir, server: s, log: filepath.Join(dir, "pgbouncer.log")}
	var users strings.Builder
	for _, u := range append([]string{"postgres"}, opts.Users...) {
		fmt.Fprintf(&users, "%q \"\"\n", u)
	}
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(users.String()), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("localpg: %w", err)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		b.Port = port
		ini := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 1000
admin_users = postgres
ignore_startup_parameters = %s
logfile = %s
pidfile = %s
server_lifetime = 3600
`, s.Port, port, filepath.Join(dir, "userlist.txt"), opts.PoolMode, opts.PoolSize,
			strings.Join(opts.IgnoreStartupParameters, ","), b.log, filepath.Join(dir, "pgbouncer.pid"))
		if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("localpg: %w", err)
		}
		if err := s.chown(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		err = b.start(ctx, bin)
		if err == nil {
			return b, nil
		}
		if attempt >= 3 || !strings.Contains(b.logTail(), "Address already in use") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func (b *Bouncer) start(ctx context.Context, bin string) error {
	// PgBouncer must outlive ctx (ctx bounds only the start).
	cmd := exec.Command(bin, filepath.Join(b.Dir, "pgbouncer.ini"))
	cmd.Dir = b.Dir
	cmd.Env = []string{"LC_ALL=C.UTF-8", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.server.cred, Setpgid: true}
	dieWithParent(cmd)
	out, err := os.OpenFile(filepath.Join(b.Dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("localpg: start pgbouncer: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	b.mu.Lock()
	b.cmd, b.exited = cmd, exited
	b.mu.Unlock()

	// A bound on a hang, as for the server (a loaded machine).
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, b.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("localpg: pgbouncer exited during start; its log:\n%s", b.logTail())
		case <-ctx.Done():
			b.kill()
			return fmt.Errorf("localpg: pgbouncer did not accept connections within 2m: %v; its log:\n%s", err, b.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *Bouncer) logTail() string {
	var all []string
	for _, f := range []string{b.log, filepath.Join(b.Dir, "stderr.log")} {
		data, _ := os.ReadFile(f)
		all = append(all, strings.Split(strings.TrimRight(string(data), "\n"), "\n")...)
	}
	if len(all) > 30 {
		all = all[len(all)-30:]
	}
	return strings.Join(all, "\n")
}

// DSN returns a connection string for database db through the pooler, as
// user postgres.
func (b *Bouncer) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.Port, db)
}

// Via returns dsn, a DSN of the bouncer's server (its Server.DSN or a
// database made by CreateDatabase, any user), pointed at the pooler.
func (b *Bouncer) Via(dsn string) string {
	return strings.Replace(dsn, "127.0.0.1:"+strconv.Itoa(b.server.Port)+"/", "127.0.0.1:"+strconv.Itoa(b.Port)+"/", 1)
}

func (b *Bouncer) kill() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// Stop ends PgBouncer (its clients' connections with it) and removes its
// directory.
func (b *Bouncer) Stop() error {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		// SIGTERM: immediate shutdown (SIGINT would wait for clients).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			b.kill()
		}
	}
	return os.RemoveAll(b.Dir)
}

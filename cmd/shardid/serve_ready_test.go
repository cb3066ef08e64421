package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/logbuf"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/migrations/migrationstest"
)

// launchServe starts `shardid serve` with args and does not wait for it.
func launchServe(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{addr: freeAddr(t), log: new(logbuf.Buffer)}
	p.cmd = exec.Command(bin, append([]string{"serve", "--listen", p.addr}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

// get returns the status and body of GET path on p, 0 while nothing
// listens.
func (p *serveProc) get(path string) (int, string) {
	c := http.Client{Timeout: time.Minute}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sigterm stops p and returns how long it took to exit.
func (p *serveProc) sigterm(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, p.log.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve ignored SIGTERM: %s", p.log)
	}
	return time.Since(start)
}

// A role that may only connect holds golang-migrate's lock on the segment
// source and on the lease database: serve listens anyway, says who holds
// the lock, answers 503 (not hanging) and is not ready, stops at once on
// SIGTERM, and serves once the lock goes.
func TestServeAdvisoryLockHeldByAnotherRole(t *testing.T) {
	bin := buildShardid(t)
	srv := pgtest.Servers(t, 1)[0]
	seg, leases := pgtest.NewDB(t, srv), pgtest.NewDB(t, srv)
	segHog := migrationstest.HoldMigrationLock(t, seg, migrations.Segment, "seghog")
	leaseHog := migrationstest.HoldMigrationLock(t, leases, migrations.Snowflake, "leasehog")
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte("segments:\n  sources:\n    - '"+seg+"'\n  tags:\n    order: {}\nsnowflake:\n  leases: '"+leases+"'\n"), 0o600))

	p := launchServe(t, bin, "--config", config)
	require.Eventually(t, func() bool {
		log := p.log.String()
		return strings.Contains(log, fmt.Sprintf("pid %d", segHog.PgConn().PID())) && strings.Contains(log, "application seghog") &&
			strings.Contains(log, fmt.Sprintf("pid %d", leaseHog.PgConn().PID())) && strings.Contains(log, "application leasehog")
	}, 2*time.Minute, 50*time.Millisecond, "serve does not say who holds the locks: %s", p.log)
	require.Contains(t, p.log.String(), "role hostile_")
	code, body := p.get("/healthz")
	require.Equal(t, 503, code, body)
	start := time.Now()
	code, body = p.get("/v1/ids/order")
	require.Equal(t, 503, code, body)
	require.Less(t, time.Since(start), 30*time.Second, "a request does not wait for the lock")
	code, body = p.get("/v1/snowflake")
	require.Equal(t, 503, code, body)
	took := p.sigterm(t)
	require.Less(t, took, 5*time.Second, "SIGTERM while waiting for the lock: %s", p.log)
	t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))

	// The lock goes: a new process serves.
	require.NoError(t, segHog.Close(context.Background()))
	require.NoError(t, leaseHog.Close(context.Background()))
	q := startServe(t, bin, config)
	_, err := q.fetch(3)
	require.NoError(t, err)
	code, body = q.get("/v1/ids/order")
	require.Equal(t, 200, code, body)
}

// On a fresh server, serve creates its source and lease databases at
// start-up, however long CREATE DATABASE takes, and /healthz says 503
// until every tag can be served.
func TestServeCreatesDatabasesAtStartUpAndIsNotReadyMeanwhile(t *testing.T) {
	ctx := context.Background()
	bin := buildShardid(t)
	own := pgtest.Own(t, localpg.Options{})
	// CREATE DATABASE waits behind this lock as it would on a busy server.
	admin, err := pgx.Connect(ctx, own.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(ctx)
	tx, err := admin.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE pg_database IN SHARE MODE")
	require.NoError(t, err)
	const held = 6 * time.Second // above the 3 s that bounded a creation
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`segments:
  sources:
    - %s
    - %s
  tags:
    order: {}
    payment: {}
snowflake:
  leases: %s
`, own.DSN("seg_a"), own.DSN("seg_b"), own.DSN("leases"))), 0o600))
	// A process stopped while CREATE DATABASE waits stops at once. It has
	// databases of its own: its CREATE DATABASE statements stay queued in
	// the server after it exits and complete when the lock goes, which
	// must not pass for the second process's work.
	earlyConfig := filepath.Join(t.TempDir(), "early.yaml")
	require.NoError(t, os.WriteFile(earlyConfig, []byte(fmt.Sprintf(`segments:
  sources:
    - %s
  tags:
    order: {}
snowflake:
  leases: %s
`, own.DSN("early_seg"), own.DSN("early_leases"))), 0o600))
	early := launchServe(t, bin, "--config", earlyConfig)
	require.Eventually(t, func() bool { code, _ := early.get("/healthz"); return code == 503 }, time.Minute, 20*time.Millisecond, "%s", early.log)
	took := early.sigterm(t)
	require.Less(t, took, 5*time.Second, "SIGTERM while creating the databases: %s", early.log)
	t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))

	p := launchServe(t, bin, "--config", config)
	require.Eventually(t, func() bool { code, _ := p.get("/healthz"); return code != 0 }, time.Minute, 20*time.Millisecond, "%s", p.log)
	lockedAt := time.Now()
	for time.Since(lockedAt) < held {
		code, body := p.get("/healthz")
		require.Equal(t, 503, code, "not ready while the databases are being created: %s", body)
		start := time.Now()
		code, body = p.get("/v1/ids/order")
		require.Equal(t, 503, code, body)
		require.Less(t, time.Since(start), 30*time.Second)
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool { code, _ := p.get("/healthz"); return code == 200 }, 2*time.Minute, 50*time.Millisecond, "%s", p.log)
	for _, db := range []string{"seg_a", "seg_b", "leases"} {
		require.True(t, databaseExists(t, own, db), db)
	}
	require.Contains(t, p.log.String(), "created segment source database")
	require.Contains(t, p.log.String(), "created the snowflake lease database")
	code, body := p.get("/v1/ids/payment")
	require.Equal(t, 200, code, body)
	_, err = p.fetch(1)
	require.NoError(t, err)
}

// Every worker id of the datacenter is leased: serve still listens, says
// 503 on /healthz and /v1/snowflake, and serves by itself once a lease
// expires.
func TestServeSnowflakeNotReadyWhileNoWorkerIsFree(t *testing.T) {
	ctx := context.Background()
	bin := buildShardid(t)
	leases := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	require.NoError(t, migrations.Up(ctx, leases, migrations.Snowflake))
	conn, err := pgx.Connect(ctx, leases)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO shardid.snowflake_leases (datacenter, worker, token, holder, expires_at, used_until_ms)
SELECT 4, w, nextval('shardid.snowflake_lease_tokens'), 'elsewhere', now() + interval '8 seconds', 0 FROM generate_series(0, 31) w`)
	require.NoError(t, err)
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte("snowflake:\n  leases: '"+leases+"'\n  datacenter: 4\n  ttl: 2s\n"), 0o600))
	p := launchServe(t, bin, "--config", config)
	require.Eventually(t, func() bool { code, _ := p.get("/healthz"); return code != 0 }, time.Minute, 20*time.Millisecond, "%s", p.log)
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = p.get("/healthz")
		require.Equal(t, 503, code, body)
		return strings.Contains(body, "all leased")
	}, time.Minute, 20*time.Millisecond, "/healthz does not say why")
	code, body = p.get("/v1/snowflake")
	require.Equal(t, 503, code, body)
	require.Eventually(t, func() bool { code, _ := p.get("/healthz"); return code == 200 }, 2*time.Minute, 100*time.Millisecond, "%s", p.log)
	ids, err := p.fetch(5)
	require.NoError(t, err)
	require.Len(t, ids, 5)
	require.Contains(t, p.log.String(), "no snowflake worker yet")
}

// A DSN that does not parse is named, its password never printed.
func TestServeDoesNotPrintAPasswordOfABadDSN(t *testing.T) {
	dir := t.TempDir()
	const bad = "host=127.0.0.1 password = s3cretpw dbname=x bad"
	for name, text := range map[string]string{
		"segments":  "segments:\n  sources: ['" + bad + "']\n  tags:\n    order: {}\n",
		"snowflake": "snowflake:\n  leases: '" + bad + "'\n",
	} {
		file := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(file, []byte(text), 0o600))
		out, err := runShardid(t, "serve", "--config", file, "--listen", "127.0.0.1:0")
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "cannot parse", name)
		require.NotContains(t, err.Error()+out, "s3cretpw", name)
		require.Equal(t, 1, exitCode(err), name)
	}
}

// serve warns when it listens beyond loopback, and not otherwise.
func TestServeWarnsWhenListeningBeyondLoopback(t *testing.T) {
	bin := buildShardid(t)
	leases := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte("snowflake:\n  leases: '"+leases+"'\n"), 0o600))
	port := strings.Split(freeAddr(t), ":")[1]
	wide := launchServe(t, bin, "--config", config, "--listen", "0.0.0.0:"+port)
	wide.addr = "127.0.0.1:" + port
	require.Eventually(t, func() bool { return strings.Contains(wide.log.String(), "no authentication and no TLS") },
		time.Minute, 20*time.Millisecond, "%s", wide.log)
	require.Contains(t, wide.log.String(), "every interface")
	wide.sigterm(t)

	local := startServe(t, bin, config)
	local.sigterm(t)
	require.NotContains(t, local.log.String(), "no authentication")
}

// No route reads a request body, so none accepts one.
func TestServeRefusesRequestBodies(t *testing.T) {
	bin := buildShardid(t)
	srv := pgtest.Servers(t, 1)[0]
	seg, leases := pgtest.NewDB(t, srv), pgtest.NewDB(t, srv)
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte("segments:\n  sources:\n    - '"+seg+"'\n  tags:\n    order: {}\nsnowflake:\n  leases: '"+leases+"'\n"), 0o600))
	p := startServe(t, bin, config)
	do := func(method, path string, body io.Reader) int {
		req, err := http.NewRequest(method, "http://"+p.addr+path, body)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/v1/ids/order", "/v1/snowflake", "/healthz", "/metrics"} {
		require.Equal(t, 200, do("GET", path, nil), path)
		require.Equal(t, 413, do("GET", path, strings.NewReader("x")), path)
		require.Equal(t, 413, do("GET", path, io.MultiReader(strings.NewReader("chunked"))), path+" (chunked)")
		require.Equal(t, 405, do("POST", path, strings.NewReader("x")), path)
	}
}

// A password with '@', '/' and '?' given as ${VAR} in a source's URL DSN
// stays the password: serve reaches the source and hands out ids, and
// neither /healthz, /metrics nor the log shows any of it (failed before:
// what followed the '@' became the host, printed on all three).
func TestServeSourcePasswordFromEnvWithAt(t *testing.T) {
	bin := buildShardid(t)
	srv := pgtest.Servers(t, 1)[0]
	seg := pgtest.NewDB(t, srv)
	require.Contains(t, seg, "postgres@")
	t.Setenv("SHARDID_TEST_SOURCE_PW", "p@sstail/x?y#z")
	source := strings.Replace(seg, "postgres@", "postgres:${SHARDID_TEST_SOURCE_PW}@", 1)
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte("segments:\n  sources:\n    - '"+source+"'\n  tags:\n    order: {}\n"), 0o600))
	p := startServe(t, bin, config)
	code, body := p.get("/v1/ids/order")
	require.Equal(t, 200, code, body)
	code, metrics := p.get("/metrics")
	require.Equal(t, 200, code, metrics)
	require.Contains(t, metrics, fmt.Sprintf("127.0.0.1:%d/", srv.Port))
	_, health := p.get("/healthz")
	for what, text := range map[string]string{"/metrics": metrics, "/healthz": health, "log": p.log.String()} {
		require.NotContains(t, text, "sstail", what)
	}
}

// On loopback, serve answers only loopback names and those --allow-host
// gives: a page whose name an attacker pointed at 127.0.0.1 (DNS
// rebinding) gets 421 and no ids (failed before: any Host was served).
func TestServeRefusesForeignHostOnLoopback(t *testing.T) {
	bin := buildShardid(t)
	srv := pgtest.Servers(t, 1)[0]
	seg, leases := pgtest.NewDB(t, srv), pgtest.NewDB(t, srv)
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte("segments:\n  sources:\n    - '"+seg+"'\n  tags:\n    order: {}\nsnowflake:\n  leases: '"+leases+"'\n"), 0o600))
	p := launchServe(t, bin, "--config", config, "--allow-host", "ids.internal")
	require.Eventually(t, func() bool { code, _ := p.get("/healthz"); return code == 200 }, 2*time.Minute, 50*time.Millisecond, "%s", p.log)
	port := strings.Split(p.addr, ":")[1]
	get := func(host, path string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+p.addr+path, nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/ids/order", "/v1/snowflake", "/healthz", "/metrics"} {
		for _, host := range []string{"attacker.example:" + port, "attacker.example", "10.1.2.3:" + port} {
			code, body := get(host, path)
			require.Equal(t, http.StatusMisdirectedRequest, code, "%s %s: %s", host, path, body)
			require.Contains(t, body, "--allow-host")
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "ids.internal:" + port, "IDS.internal"} {
			code, body := get(host, path)
			require.Equal(t, http.StatusOK, code, "%s %s: %s", host, path, body)
		}
	}
}

// A DSN of an unknown URL scheme is named, not taken for keyword/value
// settings that reach the default Unix socket (failed before).
func TestServeNamesAnUnknownScheme(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(file, []byte("snowflake:\n  leases: 'postgress://postgres@127.0.0.1:1/x?sslmode=disable'\n"), 0o600))
	_, err := runShardid(t, "serve", "--config", file, "--listen", "127.0.0.1:0")
	require.Error(t, err)
	require.Contains(t, err.Error(), `unknown URL scheme "postgress"`)
	require.Equal(t, 1, exitCode(err))
}

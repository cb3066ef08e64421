package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// startServeInProcess runs shardid serve on a free port with a cluster file whose
// segments: sources are dsns, and returns its address.
func startServeInProcess(t *testing.T, dsns ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "shardid.yaml")
	text := "segments:\n  sources:\n"
	for _, d := range dsns {
		text += "    - " + d + "\n"
	}
	text += "  tags:\n    payment: {}\n"
	require.NoError(t, os.WriteFile(file, []byte(text), 0o600))
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"serve", "--config", file, "--listen", addr, "--heap-mib", "0"})
		done <- root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	})
	return addr
}

func getStatus(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func databaseExists(t *testing.T, s *localpg.Server, name string) bool {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var ok bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&ok))
	return ok
}

func TestServeCreatesItsSourceDatabases(t *testing.T) {
	srv := pgtest.Servers(t, 1)[0]
	a, b := fmt.Sprintf("seg_a_%d", time.Now().UnixNano()), fmt.Sprintf("seg_b_%d", time.Now().UnixNano())
	// No sslmode, as in the README: the case whose error read "tls error".
	dsn := func(db string) string { return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s", srv.Port, db) }
	addr := startServeInProcess(t, dsn(a), dsn(b))
	require.Eventually(t, func() bool { return getStatus(addr, "/v1/ids/payment?count=3") == 200 },
		30*time.Second, 50*time.Millisecond)
	require.True(t, databaseExists(t, srv, a))
	require.True(t, databaseExists(t, srv, b))
}

func TestServeCreatesTheDatabaseOfASourceThatComesUpLater(t *testing.T) {
	ctx := context.Background()
	shared := pgtest.Servers(t, 1)[0]
	late := pgtest.Own(t, localpg.Options{})
	require.NoError(t, late.Halt())
	name := fmt.Sprintf("seg_late_%d", time.Now().UnixNano())
	addr := startServeInProcess(t, shared.DSN(name), late.DSN(name))

	// A new tag needs every source: none can serve it yet.
	require.Eventually(t, func() bool { return getStatus(addr, "/v1/ids/payment") == 503 },
		30*time.Second, 50*time.Millisecond)
	// Failing long enough for the source's circuit breaker to open: then
	// only its probe brings it back, and the probe must create the database.
	time.Sleep(2 * time.Second)
	require.NoError(t, late.Restart(ctx))
	require.Eventually(t, func() bool { return getStatus(addr, "/v1/ids/payment") == 200 },
		60*time.Second, 100*time.Millisecond)
	require.True(t, databaseExists(t, late, name))
}

package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/internal/localpg"
)

// Psql returns the psql to run: the one beside the servers' binaries,
// else the one on PATH. A bundle of another major (SHARDID_PG_BIN, make
// test-versions) has no psql; Debian's talks to every major these tests
// start (14 to 18).
func Psql(t testing.TB) string {
	t.Helper()
	bin, err := localpg.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if p := filepath.Join(bin, "psql"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("psql")
	if err != nil {
		t.Fatalf("psql: none beside %s and none on PATH (install the Debian package postgresql-client)", bin)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// SkipWithoutCGenerator skips a test of the C generator (ext/shardid) on
// servers started from a bundle (SHARDID_PG_BIN) that do not offer the
// extension: it is built with the server headers of Debian's PostgreSQL
// 15 (scripts/ensure-pgdev), the only major whose headers can be had
// here. On the system's binaries nothing is skipped: a missing extension
// there fails the test (make ext installs it).
func SkipWithoutCGenerator(t testing.TB, s *localpg.Server) {
	t.Helper()
	if os.Getenv(localpg.BinEnv) == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var available bool
	var version string
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_available_extensions WHERE name = 'shardid'),
		current_setting('server_version')`).Scan(&available, &version); err != nil {
		t.Fatal(err)
	}
	if !available {
		t.Skipf("the C generator: PostgreSQL %s (%s=%s) has no shardid extension; it is built with Debian's PostgreSQL 15 server headers, the only ones here", version, localpg.BinEnv, os.Getenv(localpg.BinEnv))
	}
}

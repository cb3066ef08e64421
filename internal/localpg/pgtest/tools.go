package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// Tool returns the path of a client program that reads or writes the
// servers' data format (pg_dump, pg_restore, pg_basebackup): the one
// beside the servers' binaries, else the system's of the same major or
// newer (pg_dump reads a server of its own major or older only). A
// bundle of another major (SHARDID_PG_BIN) has none of them and the
// system's (Debian's 15) serves 14 and 15 only: on 16 to 18 the test is
// skipped, its message naming the missing program and major.
func Tool(t testing.TB, name string) string {
	t.Helper()
	bin, err := localpg.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if p := filepath.Join(bin, name); fileExists(p) {
		return p
	}
	major, err := serverMajor(bin)
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var have []string
	for _, d := range dirs {
		m, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || !fileExists(filepath.Join(d, name)) {
			continue
		}
		if m >= major {
			return filepath.Join(d, name)
		}
		have = append(have, strconv.Itoa(m))
	}
	system := "none"
	if len(have) > 0 {
		system = strings.Join(have, ", ")
	}
	t.Skipf("needs %s of PostgreSQL %d or newer: %s=%s has none (the npm bundles hold initdb, pg_ctl and postgres only) and the system's is of major %s",
		name, major, localpg.BinEnv, bin, system)
	return ""
}

// serverMajor is the major version of the postgres in bin
// ("postgres (PostgreSQL) 18.4" -> 18).
func serverMajor(bin string) (int, error) {
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("pgtest: %s/postgres --version: %w", bin, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return 0, fmt.Errorf("pgtest: %s/postgres --version printed nothing", bin)
	}
	v := fields[len(fields)-1]
	if i := strings.IndexAny(v, ".b"); i > 0 {
		v = v[:i]
	}
	major, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("pgtest: %s/postgres --version: %q: no major version", bin, out)
	}
	return major, nil
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

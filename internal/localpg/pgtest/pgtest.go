// Package pgtest shares local PostgreSQL servers across the tests of one
// package and gives each test a database of its own, so tests can run in
// parallel without seeing each other's objects.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
//		...
//	}
package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/localpg"
)

var (
	mu      sync.Mutex
	shared  []*localpg.Server
	owned   []*localpg.Server
	counter atomic.Int64
)

// Main runs the tests, then stops every server this package started.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	for _, s := range append(shared, owned...) {
		s.Stop()
	}
	mu.Unlock()
	localpg.RemoveTemplates()
	os.Exit(code)
}

// Servers returns n servers shared by every test of the package, starting
// those not yet running. Tests must not stop or crash them; see Own.
func Servers(t testing.TB, n int) []*localpg.Server {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if missing := n - len(shared); missing > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		more, err := localpg.StartN(ctx, missing, localpg.Options{})
		if err != nil {
			t.Fatalf("start local PostgreSQL: %v", err)
		}
		shared = append(shared, more...)
	}
	return shared[:n]
}

// Own starts a server for this test alone (to crash, halt or re-clock it);
// it is stopped when the test ends.
func Own(t testing.TB, opts localpg.Options) *localpg.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := localpg.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start local PostgreSQL: %v", err)
	}
	mu.Lock()
	owned = append(owned, s)
	mu.Unlock()
	t.Cleanup(func() { s.Stop() })
	return s
}

// NewDB creates a database with a name unique to this test on s and returns
// its DSN; the database is dropped when the test ends.
func NewDB(t testing.TB, s *localpg.Server) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", counter.Add(1), sanitize(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	ctx := context.Background()
	dsn, err := s.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			return // the server may have been stopped by the test
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return dsn
}

// Pool opens a pgx pool on dsn, closed when the test ends.
func Pool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, s)
}

// ReachableTempDir returns a new directory, removed when the test ends,
// that the postgres user can enter (t.TempDir's are mode 0700, owned by
// root when tests run as root), for servers the test starts in a
// directory of its choosing (localpg.StartDetached).
func ReachableTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shardid-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Bouncer starts a PgBouncer in front of s for this test alone (see
// localpg.BouncerOptions); it is stopped when the test ends. A test that
// needs it fails when the machine lacks pgbouncer: scripts/ensure-pgbouncer
// (make test) installs it.
func Bouncer(t testing.TB, s *localpg.Server, opts localpg.BouncerOptions) *localpg.Bouncer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := s.StartPgBouncer(ctx, opts)
	if err != nil {
		t.Fatalf("start PgBouncer: %v", err)
	}
	t.Cleanup(func() { b.Stop() })
	return b
}

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
	"net/url"
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

var planters atomic.Int64

// Planter creates a login role that is no superuser and makes it the
// owner of dsn's database, as a database made in advance for an
// application is (CREATE DATABASE app OWNER app): the role a hostile
// application would log in as. It returns the role and dsn connecting as
// it (dsn is a URL). The role goes, with what it owns there, when the
// test ends.
func Planter(t testing.TB, dsn string) (role, roleDSN string) {
	t.Helper()
	ctx := context.Background()
	role = fmt.Sprintf("planter_%d_%d", os.Getpid(), planters.Add(1))
	q := pgx.Identifier{role}.Sanitize()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := admin.Config().Database
	if _, err := admin.Exec(ctx, "CREATE ROLE "+q+" LOGIN NOSUPERUSER"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" OWNER TO "+q); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" OWNER TO CURRENT_USER")
		conn.Exec(ctx, "DROP OWNED BY "+q+" CASCADE")
		conn.Exec(ctx, "DROP ROLE IF EXISTS "+q)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return role, u.String()
}

// Superuser reports whether role is a superuser on dsn's server.
func Superuser(t testing.TB, dsn, role string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = $1`, role).Scan(&super); err != nil {
		t.Fatal(err)
	}
	return super
}

// PlantSQL is what a planter runs in a database the toolkit will write
// into: schema shardid (kept if it made it already, with tables) and a
// statement trigger on each of tables that makes role a superuser when
// the toolkit writes there.
func PlantSQL(role string, tables ...string) string {
	s := fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS shardid;
CREATE FUNCTION shardid.promote() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN ALTER ROLE %s SUPERUSER; RETURN NULL; END$$;`,
		pgx.Identifier{role}.Sanitize())
	for _, t := range tables {
		s += fmt.Sprintf(`
CREATE TRIGGER promote AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT EXECUTE FUNCTION shardid.promote();`, t)
	}
	return s
}

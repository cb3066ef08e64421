// Package migrations holds the toolkit's own schema migrations, embedded in
// the binary, and applies them with golang-migrate (pgx/v5 driver).
//
// Each Set lives in the shardid schema of its database with a version table
// of its own, so several sets can share one database (a catalog database may
// also serve segments). golang-migrate holds an advisory lock while it
// migrates, so two managers upgrading at once cannot interleave.
package migrations

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing/fstest"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/internal/pgtrust"
)

// Schema is where the toolkit keeps its own tables in any database it manages.
const Schema = "shardid"

// Set is one sequence of golang-migrate files (NNN_name.up.sql /
// NNN_name.down.sql) with its own version table in Schema.
type Set struct {
	Name  string // for messages: "catalog", "segment"
	FS    fs.FS  // holds the files at its root
	Table string // version table, e.g. "catalog_migrations"
}

// Up applies every migration of set not yet applied to the database at dsn.
// It creates Schema when missing. Running it again changes nothing.
// Before anything, it refuses (an error wrapping pgtrust.ErrUntrusted) a
// Schema that another role made or put anything in (pgtrust.Check):
// migrations and the version table's writes would run that role's
// triggers as this one.
func Up(ctx context.Context, dsn string, set Set, opts ...Option) error {
	cfg, err := pgsession.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("%s migrations: %w", set.Name, err)
	}
	return UpConfig(ctx, cfg, set, opts...)
}

// UpConfig is Up on the database cfg connects to, with cfg's dial and
// session settings: a caller that bounds its connections per server
// (shardmgr/cluster) hands its config here. Up holds one connection at a
// time.
func UpConfig(ctx context.Context, cfg *pgx.ConnConfig, set Set, opts ...Option) error {
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	if o.poolerCheck {
		pooled, err := checkThroughPooler(ctx, cfg, set)
		if pooled {
			return err
		}
		o.direct = true // or not answering: the run reports that
	}
	return run(ctx, cfg, set, o, func(m *migrate.Migrate) error {
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return err
		}
		return nil
	})
}

// To migrates the database at dsn up or down to version of set: for tests
// that need a catalog of an older schema, and for a repair by hand.
func To(ctx context.Context, dsn string, set Set, version uint, opts ...Option) error {
	cfg, err := pgsession.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("%s migrations: %w", set.Name, err)
	}
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	return run(ctx, cfg, set, o, func(m *migrate.Migrate) error {
		if err := m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return err
		}
		return nil
	})
}

// Version reports the applied version of set (0 when none) and whether the
// last migration failed half way (dirty).
func Version(ctx context.Context, dsn string, set Set, opts ...Option) (version uint, dirty bool, err error) {
	cfg, err := pgsession.ParseConfig(dsn)
	if err != nil {
		return 0, false, fmt.Errorf("%s migrations: %w", set.Name, err)
	}
	o, err := newOptions(opts)
	if err != nil {
		return 0, false, err
	}
	err = run(ctx, cfg, set, o, func(m *migrate.Migrate) error {
		version, dirty, err = m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			version, dirty, err = 0, false, nil
		}
		return err
	})
	return version, dirty, err
}

// run connects with cfg and runs f on a golang-migrate instance for set,
// on one connection throughout: the look at the lock and golang-migrate's
// work share it, so that a run never holds one connection while it waits
// for a second (a bounded number of connections per server could
// otherwise run out with every run holding its first). The wait for
// golang-migrate's lock is bounded by o.lockWait (golang-migrate's own
// pg_advisory_lock waits forever, with no context), and run returns when
// ctx ends even if golang-migrate has not: it is then left to finish in
// the background, which the session's lock_timeout bounds.
func run(ctx context.Context, cfg *pgx.ConnConfig, set Set, o options, f func(*migrate.Migrate) error) error {
	cfg = cfg.Copy()
	if !o.direct { // else probed already (WithPoolerCheck)
		if err := refusePooler(ctx, cfg); err != nil {
			return fmt.Errorf("%s migrations on %s: %w", set.Name, cfg.Database, err)
		}
	}
	// A migration may run long (an index build): the server's
	// statement_timeout and the like do not apply to the toolkit's session.
	pgsession.OwnTimeouts(&cfg.Config)
	// Every lock a migration session waits for, the advisory one
	// included, gives up after the wait.
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(max(o.lockWait.Milliseconds(), 1), 10)
	sqlDB := stdlib.OpenDB(*cfg)
	sqlDB.SetMaxOpenConns(1)
	var db string
	var key int64
	var left time.Duration
	err := func() error {
		sc, err := sqlDB.Conn(ctx)
		if err != nil {
			return err
		}
		defer sc.Close() // back to sqlDB, for golang-migrate
		return sc.Raw(func(dc any) error {
			conn := dc.(*stdlib.Conn).Conn()
			if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
				return err
			}
			// Never CREATE SCHEMA IF NOT EXISTS: that adopts a schema
			// another role planted, whose triggers would then run as
			// this role at the first write.
			if err := pgtrust.EnsureSchema(ctx, conn, Schema); err != nil {
				return err
			}
			if key, err = LockKey(db, set); err != nil {
				return err
			}
			left, err = waitForLock(ctx, conn, db, key, set, o)
			return err
		})
	}()
	if err != nil {
		sqlDB.Close()
		return fmt.Errorf("%s migrations on %s: %w", set.Name, cmp.Or(db, cfg.Database), err)
	}
	done := make(chan error, 1)
	stop := make(chan struct{})
	go func() { done <- migrateOnce(sqlDB, db, set, left, stop, f) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// golang-migrate stops between migrations; one under way is let
		// finish (bounded): returning now lets a process exit in the
		// middle of it, leaving the version dirty, which only an
		// operator's force clears (a serve stopped while it prepared its
		// lease database did).
		close(stop)
		select {
		case <-done:
		case <-time.After(interruptWait):
		}
		return fmt.Errorf("%s migrations on %s: %w", set.Name, db, ctx.Err())
	}
	if err != nil && lockTimedOut(err) {
		// Taken between our look and golang-migrate's attempt: say by
		// whom, on a connection of its own (golang-migrate's is closed).
		if conn, cerr := pgx.ConnectConfig(context.WithoutCancel(ctx), cfg); cerr == nil {
			holders, herr := pgdatabase.AdvisoryLockHolders(context.WithoutCancel(ctx), conn, key)
			conn.Close(context.WithoutCancel(ctx))
			if herr == nil && len(holders) > 0 {
				return &LockBusyError{Set: set.Name, Database: db, Key: key, Waited: o.lockWait, Holders: holders}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s migrations on %s: %w", set.Name, db, err)
	}
	return nil
}

// interruptWait bounds how long a cancelled run waits for the migration
// under way to finish.
const interruptWait = 30 * time.Second

// migrateOnce runs f on a golang-migrate instance of its own over sqlDB,
// which it closes; stop asks it to stop between migrations.
func migrateOnce(sqlDB *sql.DB, db string, set Set, lockWait time.Duration, stop <-chan struct{}, f func(*migrate.Migrate) error) error {
	defer sqlDB.Close()
	driver, err := pgxmigrate.WithInstance(sqlDB, &pgxmigrate.Config{
		MigrationsTable:       fmt.Sprintf("%q.%q", Schema, set.Table),
		MigrationsTableQuoted: true,
		DatabaseName:          db,
	})
	if err != nil {
		return err
	}
	src, err := iofs.New(set.FS, ".")
	if err != nil {
		return err
	}
	m, err := migrate.NewWithInstance("iofs", src, db, driver)
	if err != nil {
		return err
	}
	defer m.Close()
	// The session's lock_timeout ends the wait first, with PostgreSQL's
	// error; this is golang-migrate's own bound behind it.
	m.LockTimeout = lockWait + 5*time.Second
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-stop:
			m.GracefulStop <- true // buffered: golang-migrate reads it between migrations
		case <-finished:
		}
	}()
	return f(m)
}

// With is set with the files of extra added; a file of extra replaces the
// set's of the same version and direction. A test builds from it a
// database migrated beyond what this binary knows, or one whose migration
// failed.
func (s Set) With(extra fs.FS) (Set, error) {
	files := fstest.MapFS{}
	byKey := map[string]string{} // version and direction -> file name
	for _, fsys := range []fs.FS{s.FS, extra} {
		entries, err := fs.ReadDir(fsys, ".")
		if err != nil {
			return s, fmt.Errorf("%s migrations: %w", s.Name, err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			data, err := fs.ReadFile(fsys, e.Name())
			if err != nil {
				return s, fmt.Errorf("%s migrations: %w", s.Name, err)
			}
			num, _, _ := strings.Cut(e.Name(), "_")
			key := num + strings.TrimPrefix(path.Ext(strings.TrimSuffix(e.Name(), ".sql")), ".")
			if old, ok := byKey[key]; ok {
				delete(files, old)
			}
			byKey[key] = e.Name()
			files[e.Name()] = &fstest.MapFile{Data: data}
		}
	}
	s.FS = files
	return s, nil
}

// Latest is the highest version among the set's files: the schema version a
// database has once this binary has migrated it.
func (s Set) Latest() (uint, error) {
	entries, err := fs.ReadDir(s.FS, ".")
	if err != nil {
		return 0, fmt.Errorf("%s migrations: %w", s.Name, err)
	}
	var latest uint
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".up.sql") {
			continue
		}
		v, err := strconv.ParseUint(num, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s migrations: file %s has no version number", s.Name, e.Name())
		}
		latest = max(latest, uint(v))
	}
	return latest, nil
}

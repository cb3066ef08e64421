package migrations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/internal/pgdatabase"
)

// DefaultLockWait is how long Up, To and Version wait for golang-migrate's
// advisory lock on a database before giving up (see WithLockWait).
const DefaultLockWait = 30 * time.Second

// Option adjusts Up, To and Version, which check the options before they
// connect and return the error of one given a value it cannot use, naming
// it (the convention of every package of shardid: see shardmgr's doc.go).
type Option func(*options) error

type options struct {
	lockWait time.Duration
	logger   *slog.Logger
	// poolerCheck: Up checks the version through a pooler rather than
	// refusing it (WithPoolerCheck).
	poolerCheck bool
	// direct: the DSN was probed and reaches no pooler.
	direct bool
}

// WithLockWait bounds the wait for golang-migrate's advisory lock, and
// for any lock a migration waits on (the session's lock_timeout); d > 0.
// golang-migrate itself waits without bound; the lock is one key of the
// database's single advisory-lock namespace, which every role with
// CONNECT on the database may take. Without it, DefaultLockWait (30s).
func WithLockWait(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("migrations: WithLockWait(%s): want a positive wait", d)
		}
		o.lockWait = d
		return nil
	}
}

// WithLogger sets where a wait for the lock is logged, with who holds it;
// l must not be nil (to discard, pass slog.New(slog.DiscardHandler)).
// Without it, slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("migrations: WithLogger(nil): want a logger (slog.New(slog.DiscardHandler) to discard)")
		}
		o.logger = l
		return nil
	}
}

// newOptions applies opts over the defaults: Up, To and Version return
// the error of an option given a value it cannot use before they connect.
func newOptions(opts []Option) (options, error) {
	o := options{lockWait: DefaultLockWait, logger: slog.Default()}
	for _, opt := range opts {
		if opt == nil {
			return o, errors.New("migrations: nil Option")
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// LockBusyError reports that golang-migrate's lock on a database stayed
// held by another session for the whole wait.
type LockBusyError struct {
	Set      string
	Database string
	Key      int64
	Waited   time.Duration
	Holders  []pgdatabase.LockHolder
}

func (e *LockBusyError) Error() string {
	return fmt.Sprintf("%s migrations on %s: golang-migrate's advisory lock %d is held by %s; gave up after %s",
		e.Set, e.Database, e.Key, pgdatabase.Holders(e.Holders), e.Waited.Round(time.Millisecond))
}

// LockKey is the key golang-migrate's postgres drivers lock on for set in
// the database db.
func LockKey(db string, set Set) (int64, error) {
	s, err := database.GenerateAdvisoryLockId(db, Schema, set.Table)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// waitForLock waits, within o.lockWait, until no other session holds the
// set's migration lock, logging who holds it. It returns what is left of
// the wait for golang-migrate's own attempt.
func waitForLock(ctx context.Context, conn *pgx.Conn, db string, key int64, set Set, o options) (time.Duration, error) {
	start := time.Now()
	logged := false
	for {
		holders, err := pgdatabase.AdvisoryLockHolders(ctx, conn, key)
		if err != nil {
			return 0, err
		}
		waited := time.Since(start)
		if len(holders) == 0 {
			if logged {
				o.logger.Info("golang-migrate's lock is free", "set", set.Name, "database", db, "waited", waited.Round(time.Millisecond))
			}
			return max(o.lockWait-waited, time.Second), nil
		}
		if waited >= o.lockWait {
			return 0, &LockBusyError{Set: set.Name, Database: db, Key: key, Waited: waited, Holders: holders}
		}
		if !logged {
			o.logger.Warn("waiting for golang-migrate's advisory lock", "set", set.Name, "database", db,
				"key", key, "held_by", pgdatabase.Holders(holders), "gives_up_after", o.lockWait)
			logged = true
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for golang-migrate's lock (held by %s): %w", pgdatabase.Holders(holders), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lockTimedOut reports whether err is a lock wait that ran out: the
// session's lock_timeout, or golang-migrate's own bound.
func lockTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, migrate.ErrLockTimeout) || (errors.As(err, &pe) && pe.Code == pgerrcode.LockNotAvailable)
}

package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
)

// Direction of a migration run.
type Direction string

// Directions.
const (
	Up   Direction = "up"
	Down Direction = "down"
)

// Tables a migrated shard keeps in its own schema.
const (
	// VersionTable is tern's version table, <schema>.schema_version
	// (version int4 not null, one row), so the plain tern CLI agrees on
	// the version: tern migrate --version-table shard_0005.schema_version.
	VersionTable = "schema_version"
	// FailureTable holds at most one row: the last migration that failed
	// on the shard, or a disable-tx migration that is running or was
	// interrupted. A successful step removes it.
	FailureTable = "schema_version_failure"
)

// migrateLockClass is the first key of the session advisory lock that a
// run holds on one shard (the second key is the shard id): 'shmg'. tern's
// own MigrateTo takes one lock per database, which would serialise every
// shard of a host; this one lets shards of a host migrate in parallel
// while two runs can never interleave on one shard.
const migrateLockClass int32 = 0x73686d67

// DefaultShardLockWait is how long a run waits, by default, for another
// session holding a shard's migration lock.
const DefaultShardLockWait = 10 * time.Minute

// DefaultMigrateWorkers is the number of connections per host that
// migrate shards in parallel when Options.Workers is zero.
const DefaultMigrateWorkers = 4

// Options adjust Migrate. The zero value migrates every shard up
// to the latest version with DefaultMigrateWorkers connections per host.
type Options struct {
	// Direction is Up (the zero value) or Down. Up never moves a shard
	// down, Down never moves one up: shards already past the target are
	// left alone.
	Direction Direction
	// To is the target version. Zero means the latest for Up, and before
	// the first migration for Down.
	To int
	// Shards limits the run to these logical shards. Zero means all.
	Shards []int
	// Workers is the number of connections per host, each migrating one
	// shard at a time. Zero means DefaultMigrateWorkers (4).
	Workers int
	// FailFast stops the run at the first failure: shards not yet started
	// are not run, shards in progress stop after their current migration.
	FailFast bool
	// LockTimeout bounds how long a migration waits for a table lock
	// (PostgreSQL's lock_timeout), so that an ALTER TABLE queued behind a
	// long transaction fails on its shard (SQLSTATE 55P03, run up again
	// later) instead of holding every writer of the table behind it. Zero
	// means the server's setting.
	LockTimeout time.Duration
	// LockWait bounds the wait for another session holding a shard's
	// migration lock (another run migrating it): when it runs out the
	// shard fails with an error that wraps shardmgr.ErrLockWait and names
	// the holder. Zero means DefaultShardLockWait (10m).
	LockWait time.Duration
	// Progress, when set, is called after each shard with its host's
	// counts. Calls are serialised.
	Progress func(HostProgress)
	// Waiting, when set, is called when a shard is locked by another run
	// and this one starts to wait for it. Calls are serialised.
	Waiting func(LockWait)
	// Logger receives a line per shard migrated. Zero means the handle's logger
	// (cluster.WithLogger).
	Logger *slog.Logger
}

// HostProgress is how far a run is on one host.
type HostProgress struct {
	// Host is the host's name in the cluster file.
	Host string
	// Done counts the shards finished, failed ones included, of Total on
	// the host; Failed those that failed.
	Done   int
	Total  int
	Failed int
}

// LockWait says that a run waits for another one holding a shard's lock.
type LockWait struct {
	// Shard is the logical shard whose lock the run waits for; Host the
	// host that holds it.
	Shard int
	Host  string
	// HolderPID is the backend holding the lock, 0 when unknown.
	HolderPID int
}

// Result is what a run did, per shard.
type Result struct {
	// Direction is the run's: Up or Down.
	Direction Direction `json:"direction"`
	// Target is the version the run brought shards to, TargetName its
	// file ("" for version 0).
	Target     int    `json:"target"`
	TargetName string `json:"target_name,omitempty"`
	// Latest is the number of migrations in the directory.
	Latest int `json:"latest"`
	// Shards holds one entry per shard the run was asked for, ascending by
	// id.
	Shards []ShardMigration `json:"shards"`
	// Elapsed is the wall time of the run.
	Elapsed time.Duration `json:"-"`
}

// ShardMigration is what a run did on one shard.
type ShardMigration struct {
	// ID is the logical shard; Host the host it ran on.
	ID   int    `json:"id"`
	Host string `json:"host"`
	// From and To are the shard's versions before and after the run; -1
	// when the version could not be read (or, with FailFast, the shard was
	// never started).
	From int `json:"from"`
	To   int `json:"to"`
	// Applied is the number of migrations run on the shard.
	Applied int `json:"applied"`
	// Stopped is set when --fail-fast stopped the shard before its target.
	Stopped bool `json:"stopped,omitempty"`
	// Err is why the shard stopped before its target.
	Err *MigrationError `json:"error,omitempty"`
}

// Counts sums a result up: shards changed, already at the target, failed,
// and stopped by Options.FailFast.
func (r *Result) Counts() (changed, unchanged, failed, stopped int) {
	for _, s := range r.Shards {
		switch {
		case s.Err != nil:
			failed++
		case s.Stopped:
			stopped++
		case s.Applied > 0:
			changed++
		default:
			unchanged++
		}
	}
	return
}

// MigrationError is one shard's failure: where it stopped, which
// migration failed and the database's error.
type MigrationError struct {
	// Shard is the logical shard that failed; Host the host that holds it.
	Shard int    `json:"shard"`
	Host  string `json:"host"`
	// Version is the version the shard stays at, -1 when unknown (the
	// host could not be reached).
	Version int `json:"version"`
	// Migration is the file that failed; empty when the shard failed
	// before any migration ran (connection, lock, version table).
	Migration string `json:"migration,omitempty"`
	// Direction is the half of Migration that failed.
	Direction Direction `json:"direction,omitempty"`
	// SQLState is PostgreSQL's error code, when the server refused a
	// statement.
	SQLState string `json:"sqlstate,omitempty"`
	// Message is the error on one line (PostgreSQL's with its severity,
	// detail and position), after the failed statement's number in a
	// disable-tx migration.
	Message string `json:"message"`
	// Partial is set when the migration ran without a transaction
	// (disable-tx) and some of its statements may have committed.
	Partial bool `json:"partial,omitempty"`
	// Err is the error itself (errors.Is and errors.As reach it through
	// Unwrap).
	Err error `json:"-"`
}

// Error says which shard on which host stopped at which version, in which
// migration, and why.
func (e *MigrationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shard %d on %s ", e.Shard, e.Host)
	if e.Version < 0 {
		b.WriteString("at unknown version")
	} else {
		fmt.Fprintf(&b, "stopped at version %d", e.Version)
	}
	if e.Migration != "" {
		fmt.Fprintf(&b, ": %s (%s)", e.Migration, e.Direction)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.SQLState != "" {
		fmt.Fprintf(&b, " (SQLSTATE %s)", e.SQLState)
	}
	if e.Partial {
		b.WriteString(" [ran without a transaction: partly applied]")
	}
	return b.String()
}

// Unwrap returns Err.
func (e *MigrationError) Unwrap() error { return e.Err }

// Migrate runs set on the logical shards of the cluster (opts.Shards, or
// all) on their hosts as the catalog places them: hosts in parallel,
// opts.Workers shards at a time per host, each shard under its own lock,
// each migration in one transaction with its version update (unless it
// says `---- tern: disable-tx ----`).
//
// Every shard's SQL is rendered before anything runs: a template that
// does not render for some shard is an error wrapping ErrMigrationSet and
// nothing is changed. A migration that fails rolls back on its shard, is
// recorded in the shard's FailureTable for MigrationStatus, and the run
// carries on with the other shards (or stops, with FailFast); Migrate
// then returns the result and a *PartialError. Running it again finishes
// what is left. When ctx is cancelled, the result holds the shards
// finished so far, with an error wrapping ctx's.
func Migrate(ctx context.Context, c *cluster.Cluster, set *MigrationSet, opts Options) (*Result, error) {
	start := time.Now()
	if opts.Direction == "" {
		opts.Direction = Up
	}
	target, err := migrateTarget(set, opts)
	if err != nil {
		return nil, err
	}
	m, err := c.Map(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	shards, err := selectShards(m, opts.Shards)
	if err != nil {
		return nil, err
	}
	if _, err := hostsOf(c.Config(), shards); err != nil {
		return nil, err
	}
	rendered, err := set.renderAll(shards)
	if err != nil {
		return nil, err
	}
	res, err := runMigrations(ctx, c, shards, rendered, target, opts)
	if res != nil {
		res.Latest, res.TargetName = set.Latest(), set.Name(target)
		res.Elapsed = time.Since(start)
	}
	return res, err
}

// Shards brings logical shards (nil: every shard) to the version
// the rest of the cluster is at: Init calls it after installing shards
// when InitOptions.Migrations is set. With opts.To zero the target is the highest
// version any other shard has (every shard's when shards is nil), or the
// latest in dir when no shard has been migrated yet; a non-zero opts.To
// is used as given. It only moves shards up.
func Shards(ctx context.Context, c *cluster.Cluster, set *MigrationSet, shards []int, opts Options) (*Result, error) {
	if opts.Direction == Down {
		return nil, errors.New("Shards only migrates up")
	}
	opts.Direction, opts.Shards = Up, shards
	if opts.To == 0 {
		st, err := ReadMigrationStatus(ctx, c, set)
		if err != nil {
			return nil, err
		}
		mine := map[int]bool{}
		for _, id := range shards {
			mine[id] = true
		}
		for _, s := range st.Shards {
			if (shards == nil || !mine[s.ID]) && s.Version > opts.To {
				opts.To = s.Version
			}
		}
		if opts.To > set.Latest() {
			return nil, fmt.Errorf("other shards are at version %d but the migrations directory has only %d migrations", opts.To, set.Latest())
		}
	}
	return Migrate(ctx, c, set, opts)
}

// ShardOn runs set on one shard through conn, a connection to any
// database that holds the shard's schema: also one the catalog does not
// name yet, when a move builds the shard on its new host. It takes the
// shard's migration lock on that database and moves the shard to version
// to (up or down as opts.Direction says; To zero with Up means latest).
// The error is a *MigrationError.
//
// A shard in StateMoving is a move's incoming copy, fenced from its
// creation: each step writes past the fence and fences the tables it made
// before it commits, so that no table of the copy is ever writable.
func ShardOn(ctx context.Context, conn *pgx.Conn, host string, set *MigrationSet, shard shardmgr.Shard, opts Options) (ShardMigration, error) {
	if opts.Direction == "" {
		opts.Direction = Up
	}
	target, err := migrateTarget(set, opts)
	if err != nil {
		return ShardMigration{}, err
	}
	migs, err := set.Render(shard.ID, shard.Schema)
	if err != nil {
		return ShardMigration{}, err
	}
	waiting := func(w LockWait) {
		if opts.Waiting != nil {
			opts.Waiting(w)
		}
	}
	res := migrateShard(ctx, shardRun{
		conn: conn, host: host, shard: shard, migs: migs, target: target, dir: opts.Direction,
		lockTimeout: opts.LockTimeout, lockWait: opts.LockWait, waiting: waiting,
		stop: &atomic.Bool{}, incoming: shard.State == shardmgr.StateMoving,
	})
	if res.Err != nil {
		return res, res.Err
	}
	return res, nil
}

// migrateTarget checks opts.To against set and returns the target.
func migrateTarget(set *MigrationSet, opts Options) (int, error) {
	switch opts.Direction {
	case Up:
		if opts.To < 0 || opts.To > set.Latest() {
			return 0, fmt.Errorf("target version %d is outside 0..%d (the migrations in the directory)", opts.To, set.Latest())
		}
		if opts.To == 0 {
			return set.Latest(), nil
		}
		return opts.To, nil
	case Down:
		if opts.To < 0 || opts.To > set.Latest() {
			return 0, fmt.Errorf("target version %d is outside 0..%d (the migrations in the directory)", opts.To, set.Latest())
		}
		return opts.To, nil
	}
	return 0, fmt.Errorf("unknown direction %q (up or down)", opts.Direction)
}

// selectShards returns the shards ids names (nil: all), ascending, or an
// error wrapping ErrUnknownShard.
func selectShards(m *shardmgr.ShardMap, ids []int) ([]shardmgr.Shard, error) {
	if ids == nil {
		return m.Shards, nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]shardmgr.Shard, 0, len(ids))
	for _, id := range ids {
		if id < 0 || id >= len(m.Shards) {
			return nil, fmt.Errorf("%w: %d (the cluster has shards 0..%d)", shardmgr.ErrUnknownShard, id, len(m.Shards)-1)
		}
		out = append(out, m.Shards[id])
	}
	return out, nil
}

// hostsOf returns the cluster file's entry of every host the shards are
// on; a host the catalog names but the file does not is an error.
func hostsOf(cfg *shardmgr.Config, shards []shardmgr.Shard) (map[string]shardmgr.Host, error) {
	out := map[string]shardmgr.Host{}
	for _, s := range shards {
		if _, ok := out[s.Host]; ok {
			continue
		}
		h, ok := cfg.Host(s.Host)
		if !ok {
			return nil, fmt.Errorf("%w: %s holds shards in the catalog but is not in %s", shardmgr.ErrUnknownHost, s.Host, cfg.Path)
		}
		out[s.Host] = h
	}
	return out, nil
}

// runMigrations migrates shards, hosts in parallel, and collects results.
func runMigrations(ctx context.Context, c *cluster.Cluster, shards []shardmgr.Shard, rendered map[int][]RenderedMigration, target int, opts Options) (*Result, error) {
	if opts.Workers <= 0 {
		opts.Workers = DefaultMigrateWorkers
	}
	log := opts.Logger
	if log == nil {
		log = c.Logger()
	}
	f := fanOut[ShardMigration]{
		op: "migrate " + string(opts.Direction), workers: opts.Workers, failFast: opts.FailFast, progress: opts.Progress,
		waiting: func(w LockWait) {
			log.Info("waiting for lock", "shard", w.Shard, "host", w.Host, "holder_pid", w.HolderPID)
			if opts.Waiting != nil {
				opts.Waiting(w)
			}
		},
		outcome: func(r ShardMigration) (int, string, error, bool) {
			if r.Err != nil {
				return r.ID, r.Host, r.Err, r.Stopped
			}
			return r.ID, r.Host, nil, r.Stopped
		},
		done: func(r ShardMigration) {
			if r.Err != nil {
				log.Warn("shard failed", "shard", r.ID, "host", r.Host, "err", r.Err)
			} else if r.Applied > 0 {
				log.Info("shard migrated", "shard", r.ID, "host", r.Host, "from", r.From, "to", r.To)
			}
		},
	}
	results, err := f.run(ctx, c, shards, func(host string, sh shardmgr.Shard, conn func() (*pgx.Conn, error), waiting func(LockWait), stop *atomic.Bool) ShardMigration {
		if stop.Load() {
			return ShardMigration{ID: sh.ID, Host: host, From: -1, To: -1, Stopped: true}
		}
		if sh.State == shardmgr.StateMoving {
			return failedShard(sh, host, -1, nil, "", fmt.Errorf("%w: migrate it after the move", shardmgr.ErrShardMoving))
		}
		sc, err := conn()
		if err != nil {
			return failedShard(sh, host, -1, nil, "", err)
		}
		return migrateShard(ctx, shardRun{
			conn: sc, host: host, shard: sh, migs: rendered[sh.ID], target: target, dir: opts.Direction,
			lockTimeout: opts.LockTimeout, lockWait: opts.LockWait, waiting: waiting, stop: stop,
		})
	})
	return &Result{Direction: opts.Direction, Target: target, Shards: results}, err
}

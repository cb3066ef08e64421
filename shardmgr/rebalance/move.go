package rebalance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shardid/shardid/shardmgr/internal/catalog"

	"github.com/shardid/shardid/shardmgr/migrate"

	"github.com/shardid/shardid/shardmgr/install"

	"github.com/shardid/shardid/shardmgr"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr/internal/fence"
	"github.com/shardid/shardid/shardmgr/internal/pg"
	"github.com/shardid/shardid/shardmgr/internal/shardschema"
	shsql "github.com/shardid/shardid/sql"
	"golang.org/x/sync/errgroup"
)

// DefaultKeep is how long a moved shard's old copy is kept, renamed and
// fenced, before shardid rebalance cleanup drops it.
const DefaultKeep = 24 * time.Hour

// ErrMigrationsNeeded: the shard was migrated, so building it on the
// target needs the migrations directory it was migrated with.
var ErrMigrationsNeeded = errors.New("the shard is at a migration version above 0: pass the migrations directory (--dir)")

// ErrMoveCheck: the target's copy does not match the source's (row counts,
// checksums, tables or migration version); nothing was flipped.
var ErrMoveCheck = errors.New("the copy does not match the source")

// MoveOptions adjust a move. The zero value moves online, keeps the old
// copy for DefaultKeep, and needs no migrations directory for shards that
// were never migrated.
type MoveOptions struct {
	// Mode is MoveOnline (the zero value) or MoveOffline. A resumed move
	// keeps the mode it started with.
	Mode MoveMode
	// Migrations is the directory of the shard's tern migrations: the
	// target's schema is built by running them up to the source's version.
	// Needed when that version is above 0.
	Migrations *migrate.MigrationSet
	// Keep is how long the source's old copy is kept, renamed
	// shard_NNNN_moved_gG and fenced, before Cleanup drops it. Zero means
	// DefaultKeep; negative drops it as soon as the move is done.
	Keep time.Duration
	// CatchupDelay is how quickly a change on the source must show up on
	// the target before an online move cuts over: about how long the
	// cut-over then refuses writes. Zero means 100ms.
	CatchupDelay time.Duration
	// CutoverTimeout bounds the cut-over, while writes are refused: when
	// the target has not received every change by then, the move gives up,
	// lifts the fence and leaves the source serving. Zero means 30s.
	CutoverTimeout time.Duration
	// LockTimeout bounds each wait for a table lock when the fence goes up
	// (the attempt is retried). Zero means 1s.
	LockTimeout time.Duration
	// ConnInfo returns the libpq connection string the target's server
	// uses to reach the source host for logical replication. Nil builds one
	// from the host's DSN in the cluster file (host, port, dbname, user,
	// password, sslmode).
	ConnInfo func(source shardmgr.Host) (string, error)
	// Progress, when set, is called as a move advances. Calls for one move
	// are serialised; several moves may call it concurrently.
	Progress func(MoveProgress)
	// Logger receives a line per phase. Nil discards them.
	Logger *slog.Logger

	// stopAfter, in tests, stops the move right after it recorded this
	// phase, as a crash there would.
	stopAfter Phase
	// afterScans, in tests, runs after an online move scanned both hosts
	// before its fence.
	afterScans func(ctx context.Context, src, dst *pgxpool.Pool) error
	// flipCatalog, in tests, runs in the flip's catalog transaction after
	// the target was opened; an error fails the flip there.
	flipCatalog func() error
}

// MoveProgress is where one move stands.
type MoveProgress struct {
	ID     int64
	Shard  int
	From   string
	To     string
	Phase  Phase // the phase being worked towards
	Tables int   // tables of the shard
	Synced int   // tables whose initial copy is done (online)
	Rows   int64 // rows copied or verified so far
	Bytes  int64 // the shard's size on the source
	Lag    int64 // replication lag in bytes of WAL (online), -1 when unknown
}

// MoveResult is what one move did. JSON has the fields below.
type MoveResult struct {
	ID    int64    `json:"id"`
	Shard int      `json:"shard"`
	From  string   `json:"from"`
	To    string   `json:"to"`
	Mode  MoveMode `json:"mode"`
	Phase Phase    `json:"phase"`
	Rows  int64    `json:"rows"`
	Bytes int64    `json:"bytes"`
	// RefusedMS is how long writes to the shard were refused: from the
	// catalog marking it moving to the flip, in milliseconds.
	RefusedMS int64 `json:"refused_ms"`
	// ElapsedMS is the time this run spent on the move.
	ElapsedMS int64 `json:"elapsed_ms"`
	// Generation is the catalog generation of the flip.
	Generation    int64  `json:"generation"`
	RetiredSchema string `json:"retired_schema,omitempty"`
	Error         string `json:"error,omitempty"`
}

// errStopped is returned by the stopAfter test hook.
var errStopped = errors.New("stopped after phase (test)")

// mover runs moves of one cluster; it holds the catalog pool and a pool
// per host.
type mover struct {
	cfg     *shardmgr.Config
	catalog *pgxpool.Pool
	m       *shardmgr.Map
	opts    MoveOptions
	log     *slog.Logger

	mu    sync.Mutex
	pools map[string]*pgxpool.Pool
}

// openCatalogForMoves upgrades the catalog (the journal is migration 010)
// and opens a pool on it.
func openCatalogForMoves(ctx context.Context, cfg *shardmgr.Config) (*pgxpool.Pool, error) {
	if err := migrations.Up(ctx, cfg.Catalog, migrations.Catalog); err != nil {
		return nil, err
	}
	pool, err := pg.OpenPool(ctx, cfg.Catalog, 8)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return pool, nil
}

func newMover(ctx context.Context, cfg *shardmgr.Config, opts MoveOptions) (*mover, error) {
	if opts.Mode == "" {
		opts.Mode = MoveOnline
	}
	if opts.Mode != MoveOnline && opts.Mode != MoveOffline {
		return nil, fmt.Errorf("move mode %q: want online or offline", opts.Mode)
	}
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if opts.CatchupDelay <= 0 {
		opts.CatchupDelay = 100 * time.Millisecond
	}
	if opts.CutoverTimeout <= 0 {
		opts.CutoverTimeout = 30 * time.Second
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	catalog, err := openCatalogForMoves(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := shardmgr.ReadMap(ctx, catalog)
	if err != nil {
		catalog.Close()
		return nil, err
	}
	return &mover{cfg: cfg, catalog: catalog, m: m, opts: opts, log: log, pools: map[string]*pgxpool.Pool{}}, nil
}

func (mo *mover) close() {
	mo.mu.Lock()
	defer mo.mu.Unlock()
	for _, p := range mo.pools {
		p.Close()
	}
	mo.catalog.Close()
}

// pool returns the pool of host name from the cluster file.
func (mo *mover) pool(ctx context.Context, name string) (*pgxpool.Pool, error) {
	mo.mu.Lock()
	defer mo.mu.Unlock()
	if p, ok := mo.pools[name]; ok {
		return p, nil
	}
	h, ok := mo.cfg.Host(name)
	if !ok {
		return nil, fmt.Errorf("host %s: %w (not in the cluster file)", name, shardmgr.ErrUnknownHost)
	}
	p, err := pg.OpenPool(ctx, h.DSN, 8)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	mo.pools[name] = p
	return p, nil
}

func (mo *mover) ends(ctx context.Context, rec *MoveRecord) (src, dst *pgxpool.Pool, err error) {
	if src, err = mo.pool(ctx, rec.From); err != nil {
		return nil, nil, err
	}
	if dst, err = mo.pool(ctx, rec.To); err != nil {
		return nil, nil, err
	}
	return src, dst, nil
}

// MoveShard moves logical shard shard to host to, online unless
// opts.Mode says offline, and returns what it did. Hosts new in the
// cluster file are registered first (as shardid init does). A shard with
// an unfinished move to the same host resumes it; to another host it is
// ErrMoveOpen.
//
// Any failure before the flip leaves the source serving as before (the
// fence is lifted when the cut-over fails) and the target's copy
// removable with AbortMove; the journal records the error. After the
// flip, moving the shard back is a move like any other.
func MoveShard(ctx context.Context, cfg *shardmgr.Config, shard int, to string, opts MoveOptions) (*MoveResult, error) {
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	h, ok := cfg.Host(to)
	if !ok {
		return nil, fmt.Errorf("move shard %d to %s: %w (not in the cluster file %s)", shard, to, shardmgr.ErrUnknownHost, cfg.Path)
	}
	if h.Drain {
		return nil, fmt.Errorf("move shard %d to %s: the host is marked drain in %s", shard, to, cfg.Path)
	}
	if shard < 0 || shard >= cfg.Shards {
		return nil, &shardmgr.ShardError{Shard: shard, Err: shardmgr.ErrUnknownShard}
	}
	if err := registerHosts(ctx, cfg); err != nil {
		return nil, err
	}
	mo, err := newMover(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	defer mo.close()
	open, err := readMoves(ctx, mo.catalog, `shard = $1 AND `+catalog.OpenMoves, shard)
	if err != nil {
		return nil, err
	}
	var rec *MoveRecord
	if len(open) > 0 {
		rec = open[0]
		if rec.To != to {
			return nil, &shardmgr.ShardError{Shard: shard, Err: fmt.Errorf("%w: move %d to %s is in phase %s", ErrMoveOpen, rec.ID, rec.To, rec.Phase)}
		}
	} else {
		from := mo.m.Shards[shard].Host
		if from == to {
			return nil, fmt.Errorf("shard %d is already on %s", shard, to)
		}
		recs, err := mo.journal(ctx, []PlannedMove{{Shard: shard, From: from, To: to}})
		if err != nil {
			return nil, err
		}
		rec = recs[0]
	}
	return mo.run(ctx, rec)
}

// registerHosts runs Init when the cluster file names hosts the catalog
// does not know, or changes a host's DSN or drain mark: Init registers them
// and prepares the new hosts' records. Otherwise it only checks that the
// catalog holds the cluster.
func registerHosts(ctx context.Context, cfg *shardmgr.Config) error {
	m, err := catalog.ReadClusterMap(ctx, cfg)
	if err != nil {
		return err
	}
	for _, h := range cfg.Hosts {
		ch, ok := m.Host(h.Name)
		if !ok || ch.DSN != h.RawDSN() || ch.Drain != h.Drain {
			_, err := install.Init(ctx, cfg, install.InitOptions{})
			return err
		}
	}
	return nil
}

// journal records planned moves in one catalog transaction, after
// checking them against the map.
func (mo *mover) journal(ctx context.Context, moves []PlannedMove) ([]*MoveRecord, error) {
	var out []*MoveRecord
	err := pgx.BeginFunc(ctx, mo.catalog, func(tx pgx.Tx) error {
		out = out[:0]
		m, err := shardmgr.ReadMap(ctx, tx)
		if err != nil {
			return err
		}
		for _, pm := range moves {
			if pm.Shard < 0 || pm.Shard >= len(m.Shards) {
				return &shardmgr.ShardError{Shard: pm.Shard, Err: shardmgr.ErrUnknownShard}
			}
			s := m.Shards[pm.Shard]
			if s.Host != pm.From {
				return &shardmgr.ShardError{Shard: pm.Shard, Err: fmt.Errorf("the catalog places it on %s, not %s (plan again)", s.Host, pm.From)}
			}
			if s.State != shardmgr.StateActive {
				return &shardmgr.ShardError{Shard: pm.Shard, Host: s.Host, Err: fmt.Errorf("shard is %s, not active", s.State)}
			}
			if _, ok := m.Host(pm.To); !ok {
				return fmt.Errorf("host %s: %w (run shardid init)", pm.To, shardmgr.ErrUnknownHost)
			}
			rec, err := journalMove(ctx, tx, pm.Shard, pm.From, pm.To, mo.opts.Mode, s.Schema, pm.Bytes, mo.opts.Keep)
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal moves: %w", err)
	}
	return out, nil
}

func (mo *mover) progress(rec *MoveRecord, p MoveProgress) {
	if mo.opts.Progress == nil {
		return
	}
	p.ID, p.Shard, p.From, p.To = rec.ID, rec.Shard, rec.From, rec.To
	if p.Bytes == 0 {
		p.Bytes = rec.Bytes
	}
	mo.opts.Progress(p)
}

// sourceFenced reports whether a move in phase p has the source fenced
// and the map not yet flipped.
func sourceFenced(mode MoveMode, p Phase) bool {
	return p == PhaseFenced || (mode == MoveOffline && (p == PhaseCopy || p == PhaseVerified)) || (mode == MoveOnline && p == PhaseVerified)
}

// moveLockClass is the first key of the session advisory lock, on the
// catalog, that a manager holds while it runs or aborts a move (the second
// key is the move's id): 'shmv'.
const moveLockClass int32 = 0x73686d76

// ErrMoveBusy: another manager is running or aborting the move.
var ErrMoveBusy = errors.New("another manager is working on this move")

// lockMove takes the move's lock on a connection of its own, so that two
// managers never work on one move at once; the returned function releases
// it. The lock goes with the session if the process dies.
func (mo *mover) lockMove(ctx context.Context, rec *MoveRecord) (func(), error) {
	conn, err := pg.Connect(ctx, mo.cfg.Catalog)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock($1, $2)`, moveLockClass, int32(rec.ID)).Scan(&ok); err != nil || !ok {
		conn.Close(context.WithoutCancel(ctx))
		if err == nil {
			err = fmt.Errorf("move %d of shard %d: %w", rec.ID, rec.Shard, ErrMoveBusy)
		}
		return nil, err
	}
	return func() { conn.Close(context.WithoutCancel(ctx)) }, nil
}

// run takes a journaled move from its phase to cleaned.
func (mo *mover) run(ctx context.Context, rec *MoveRecord) (*MoveResult, error) {
	start := time.Now()
	unlock, err := mo.lockMove(ctx, rec)
	if err != nil {
		return &MoveResult{ID: rec.ID, Shard: rec.Shard, From: rec.From, To: rec.To, Mode: rec.Mode, Phase: rec.Phase, Error: err.Error()}, err
	}
	defer unlock()
	// Re-read the journal under the lock: another manager may have moved
	// it on since it was read.
	fresh, err := readMoves(ctx, mo.catalog, `id = $1`, rec.ID)
	if err != nil {
		return nil, err
	}
	*rec = *fresh[0]
	seq := steps(rec.Mode)
	res := func() *MoveResult {
		r := &MoveResult{ID: rec.ID, Shard: rec.Shard, From: rec.From, To: rec.To, Mode: rec.Mode, Phase: rec.Phase,
			Rows: rec.Rows, Bytes: rec.Bytes, ElapsedMS: time.Since(start).Milliseconds(), RetiredSchema: rec.Retired, Error: rec.Error}
		if rec.refusedMS != nil {
			r.RefusedMS = *rec.refusedMS
		}
		if rec.flipGen != nil {
			r.Generation = *rec.flipGen
		}
		return r
	}
	for rec.Phase.Open() {
		if mo.opts.stopAfter != "" && rec.Phase == mo.opts.stopAfter {
			return res(), errStopped
		}
		i := slices.Index(seq, rec.Phase)
		if i < 0 || i+1 >= len(seq) {
			return res(), fmt.Errorf("move %d: phase %s is not one of a %s move", rec.ID, rec.Phase, rec.Mode)
		}
		next := seq[i+1]
		mo.progress(rec, MoveProgress{Phase: next, Lag: -1})
		mo.log.Info("move", "id", rec.ID, "shard", rec.Shard, "from", rec.From, "to", rec.To, "phase", next)
		err := mo.step(ctx, rec, next)
		if err != nil {
			err = &shardmgr.ShardError{Shard: rec.Shard, Host: rec.To, Err: fmt.Errorf("move %d (%s -> %s), phase %s: %w", rec.ID, rec.From, rec.To, next, err)}
			if next == PhaseFlipped {
				// The flip may have committed even though its answer was
				// lost: then the target serves, and the source must stay
				// fenced. The journal says which.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				fresh, rerr := readMoves(rctx, mo.catalog, `id = $1`, rec.ID)
				cancel()
				if rerr != nil || fresh[0].Phase.flipped() {
					if rerr == nil {
						*rec = *fresh[0]
					}
					recordError(ctx, mo.catalog, rec, err)
					return res(), err
				}
			}
			if rec.targetOpened {
				// The flip opened the target but the catalog still names
				// the source: fence the target again before the source is
				// given back, or both copies would take writes.
				if ferr := mo.refenceTarget(ctx, rec); ferr != nil {
					err = fmt.Errorf("%w; the target's copy was opened and fencing it again failed, so the source stays fenced (run shardid rebalance abort): %w", err, ferr)
					recordError(ctx, mo.catalog, rec, err)
					return res(), err
				}
			}
			if sourceFenced(rec.Mode, rec.Phase) {
				// Writes are refused: give the source back rather than
				// leave the shard unwritable until someone notices.
				if uerr := mo.unfenceSource(ctx, rec); uerr != nil {
					err = fmt.Errorf("%w; lifting the fence failed too (run shardid rebalance abort): %v", err, uerr)
				}
			}
			recordError(ctx, mo.catalog, rec, err)
			return res(), err
		}
	}
	mo.log.Info("move done", "id", rec.ID, "shard", rec.Shard, "to", rec.To, "elapsed", time.Since(start))
	return res(), nil
}

func (mo *mover) step(ctx context.Context, rec *MoveRecord, next Phase) error {
	switch next {
	case PhaseSchema:
		return mo.buildTarget(ctx, rec)
	case PhaseCopy:
		if rec.Mode == MoveOnline {
			return mo.startReplication(ctx, rec)
		}
		return mo.copyOffline(ctx, rec)
	case PhaseCatchup:
		return mo.catchUp(ctx, rec)
	case PhaseFenced:
		return mo.fence(ctx, rec)
	case PhaseVerified:
		return mo.verifyCopy(ctx, rec)
	case PhaseFlipped:
		return mo.flip(ctx, rec)
	case PhaseCleaned:
		return mo.cleanup(ctx, rec)
	}
	return fmt.Errorf("no step leads to phase %s", next)
}

// incomingComment marks a target schema as this move's, so that a resumed
// or aborted move only ever touches its own copy.
func incomingComment(rec *MoveRecord) string {
	return fmt.Sprintf("shardid: incoming copy of shard %d, move %d from %s", rec.Shard, rec.ID, rec.From)
}

// dataTables are the shard's tables that hold application rows: all but
// the migration bookkeeping.
func dataTables(ctx context.Context, q shardmgr.Querier, schema string) ([]string, error) {
	all, err := fence.ShardTables(ctx, q, schema)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(t string) bool { return t == migrate.VersionTable || t == migrate.FailureTable }), nil
}

// buildTarget creates the shard's schema on the target: generator,
// migrations up to the source's version, the same tables, empty and
// fenced. The copy is fenced from its first moment: the transaction that
// creates the schema installs the raising fence function and stops the
// generator's counter (as the fence does on a source), and each migration
// step fences the tables it made before it commits; so no write to the
// copy is acknowledged before the flip but the mover's own and the
// replication's. It is idempotent for this move's own copy.
func (mo *mover) buildTarget(ctx context.Context, rec *MoveRecord) error {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	schema := rec.Schema
	if mo.m.Variant != shsql.Safe {
		return fmt.Errorf("moves carry the safe generator's counter; the cluster uses %q (run shardid migrate generator)", mo.m.Variant)
	}
	var srcHas bool
	if err := src.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, pgx.Identifier{schema}.Sanitize()).Scan(&srcHas); err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	if !srcHas {
		return fmt.Errorf("source %s: %w: no schema %s", rec.From, migrate.ErrShardSchemaMissing, schema)
	}
	version, failure, err := migrate.ReadShardVersion(ctx, src, schema)
	if err != nil {
		return fmt.Errorf("source %s: read migration version: %w", rec.From, err)
	}
	if failure != nil {
		return fmt.Errorf("source %s: a failed migration is recorded at version %d (%s): fix it first (shardid migrate status)", rec.From, failure.Version, failure.Message)
	}
	if version > 0 && mo.opts.Migrations == nil {
		return fmt.Errorf("%w (the shard is at version %d)", ErrMigrationsNeeded, version)
	}
	seq := pgx.Identifier{schema, shsql.CounterName}.Sanitize()
	var counterMax int64
	if err := src.QueryRow(ctx, `SELECT seqmax FROM pg_catalog.pg_sequence WHERE seqrelid = to_regclass($1)`, seq).Scan(&counterMax); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("source %s: %s is missing (the safe generator's counter)", rec.From, seq)
		}
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	if rec.counterMax != nil {
		counterMax = *rec.counterMax
	}

	// The target: nothing there, or this move's own copy.
	var comment *string
	err = dst.QueryRow(ctx, `SELECT coalesce(obj_description(oid, 'pg_namespace'), '') FROM pg_catalog.pg_namespace WHERE nspname = $1`, schema).Scan(&comment)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	if comment != nil && *comment != incomingComment(rec) {
		return fmt.Errorf("target %s already holds a schema %s that this move did not make (a stray copy? see shardid verify); drop it or move the shard elsewhere", rec.To, schema)
	}
	ddl, err := shsql.Render(catalog.GeneratorParams(mo.m, rec.Shard))
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		q := pgx.Identifier{schema}.Sanitize()
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+q); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`COMMENT ON SCHEMA %s IS %s`, q, pg.QuoteLiteral(incomingComment(rec)))); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		if _, err := fence.ClampCounter(ctx, tx, schema, rec.Shard); err != nil {
			return err
		}
		if err := fence.Func(ctx, tx, schema, true); err != nil {
			return err
		}
		if err := fence.NewTables(ctx, tx, schema); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES ($1, $2, 'fenced', $3)
			ON CONFLICT (shard) DO UPDATE SET schema_name = EXCLUDED.schema_name, state = 'fenced', generation = EXCLUDED.generation`,
			rec.Shard, schema, mo.m.Generation)
		return err
	})
	if err != nil {
		return fmt.Errorf("target %s: install the generator: %w", rec.To, err)
	}
	if version > 0 {
		conn, err := dst.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("target %s: %w", rec.To, err)
		}
		_, err = migrate.MigrateShardOn(ctx, conn.Conn(), rec.To, mo.opts.Migrations,
			shardmgr.ShardInfo{ID: rec.Shard, Schema: schema, Host: rec.To, State: shardmgr.StateMoving}, migrate.MigrateOptions{To: version, Incoming: true})
		conn.Release()
		if err != nil {
			return fmt.Errorf("target %s: build the schema at version %d: %w", rec.To, version, err)
		}
	}
	got, _, err := migrate.ReadShardVersion(ctx, dst, schema)
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	if got != version {
		return fmt.Errorf("%w: the target is at migration version %d, the source at %d", ErrMoveCheck, got, version)
	}
	srcTables, err := dataTables(ctx, src, schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	dstTables, err := dataTables(ctx, dst, schema)
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	if !slices.Equal(srcTables, dstTables) {
		return fmt.Errorf("%w: the source has tables %v, the migrations made %v on the target (tables made outside the migrations cannot be moved)",
			ErrMoveCheck, srcTables, dstTables)
	}
	if rec.Mode == MoveOnline {
		rows, err := src.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = ANY($2) AND NOT (c.relreplident = 'f'
			   OR (c.relreplident = 'd' AND EXISTS (SELECT FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
			   OR (c.relreplident = 'i' AND EXISTS (SELECT FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)))
			ORDER BY 1`, schema, srcTables)
		if err != nil {
			return fmt.Errorf("source %s: %w", rec.From, err)
		}
		noKey, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("source %s: %w", rec.From, err)
		}
		if len(noKey) > 0 {
			return fmt.Errorf("tables without a primary key or replica identity cannot follow changes online: %s (use --mode offline)", strings.Join(noKey, ", "))
		}
	}
	// A migration may have seeded rows (past the fence, which kept every
	// other writer out): the copy brings the source's.
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config($1, 'on', true)`, fence.Bypass); err != nil {
			return err
		}
		if len(dstTables) > 0 {
			names := make([]string, len(dstTables))
			for i, t := range dstTables {
				names[i] = pgx.Identifier{schema, t}.Sanitize()
			}
			if _, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(names, ", ")); err != nil {
				return err
			}
		}
		return fence.Install(ctx, tx, schema, true)
	})
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	sizes, err := shardSize(ctx, src, schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	rec.Bytes, rec.Version, rec.counterMax = sizes, version, &counterMax
	return setPhase(ctx, mo.catalog, rec, PhaseSchema, "version = $3, counter_max = coalesce(counter_max, $4), bytes = $5", version, counterMax, sizes)
}

// shardSize is the total relation size of schema.
func shardSize(ctx context.Context, q shardmgr.Querier, schema string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(pg_catalog.pg_total_relation_size(c.oid)), 0)::bigint FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'm', 'S')`, schema).Scan(&n)
	return n, err
}

// startReplication publishes the shard's tables on the source and
// subscribes the target to them, which copies the rows and then follows
// every change.
func (mo *mover) startReplication(ctx context.Context, rec *MoveRecord) error {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	tables, err := dataTables(ctx, src, rec.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	name := pgx.Identifier{rec.replName}.Sanitize()
	var hasPub bool
	if err := src.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = $1)`, rec.replName).Scan(&hasPub); err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	for _, db := range []*pgxpool.Pool{src, dst} {
		if err := createMarkTable(ctx, db, rec); err != nil {
			return fmt.Errorf("mark table: %w", err)
		}
	}
	if !hasPub {
		names := []string{markTable(rec)}
		for _, t := range tables {
			names = append(names, pgx.Identifier{rec.Schema, t}.Sanitize())
		}
		if _, err := src.Exec(ctx, `CREATE PUBLICATION `+name+` FOR TABLE `+strings.Join(names, ", ")); err != nil {
			return fmt.Errorf("source %s: create publication: %w", rec.From, err)
		}
	}
	hasSub, err := subscriptionExists(ctx, dst, rec.replName)
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	if hasSub {
		return setPhase(ctx, mo.catalog, rec, PhaseCopy, "")
	}
	// The slot is made here rather than by CREATE SUBSCRIPTION: that
	// would wait forever when both hosts are databases of one server (the
	// slot waits for the transaction creating it). A slot left by an
	// earlier attempt is reused.
	if _, err := src.Exec(ctx, `SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')
		WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots WHERE slot_name = $1)`, rec.replName); err != nil {
		return fmt.Errorf("source %s: create replication slot: %w", rec.From, err)
	}
	h, _ := mo.cfg.Host(rec.From)
	conninfo, err := mo.connInfo(h)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if err := quietStatementLog(ctx, tx); err != nil {
			mo.log.Warn("the mover's role may not keep CREATE SUBSCRIPTION out of the target's server log: should it fail, the log shows the source's password",
				"id", rec.ID, "host", rec.To, "err", err)
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s WITH (slot_name = %s, create_slot = false, copy_data = true)`,
			name, pg.QuoteLiteral(conninfo), name, pg.QuoteLiteral(rec.replName)))
		return err
	})
	if err != nil {
		return fmt.Errorf("target %s: create subscription: %w", rec.To, err)
	}
	return setPhase(ctx, mo.catalog, rec, PhaseCopy, "")
}

// quietStatementLog keeps the statements of tx out of the server's log,
// for a statement that carries a password (CREATE SUBSCRIPTION's
// conninfo): the text of a failed statement (log_min_error_statement), of
// every DDL (log_statement) or of a slow one (log_min_duration_statement),
// and pg_stat_statements' copy. These are superuser settings (or granted
// with GRANT SET ON PARAMETER): when the role may not set them, tx is
// left as it was and the error says so.
func quietStatementLog(ctx context.Context, tx pgx.Tx) error {
	return pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error { // a savepoint
		_, err := sp.Exec(ctx, `SET LOCAL log_min_error_statement = panic; SET LOCAL log_statement = none;
			SET LOCAL log_min_duration_statement = -1; SET LOCAL pg_stat_statements.track_utility = off`)
		return err
	})
}

func (mo *mover) connInfo(h shardmgr.Host) (string, error) {
	if mo.opts.ConnInfo != nil {
		return mo.opts.ConnInfo(h)
	}
	return libpqConnInfo(h.DSN)
}

// libpqConnInfo turns a DSN (URL or keywords, perhaps with pgx-only
// settings) into a libpq keyword string for CREATE SUBSCRIPTION.
func libpqConnInfo(dsn string) (string, error) {
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("cannot parse DSN: %w", err)
	}
	for _, v := range []string{pc.Host, pc.Database, pc.User, pc.Password} {
		if strings.ContainsRune(v, 0) {
			return "", errors.New("cannot parse DSN: a NUL byte in a value")
		}
	}
	kv := func(k, v string) string {
		return k + "='" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `'`, `\'`) + "'"
	}
	parts := []string{kv("host", pc.Host), kv("port", fmt.Sprint(pc.Port)), kv("dbname", pc.Database), kv("user", pc.User)}
	if pc.Password != "" {
		parts = append(parts, kv("password", pc.Password))
	}
	mode := "disable"
	if pc.TLSConfig != nil {
		mode = "require"
		for _, f := range pc.Fallbacks {
			if f.TLSConfig == nil {
				mode = "prefer"
			}
		}
	}
	parts = append(parts, kv("sslmode", mode))
	return strings.Join(parts, " "), nil
}

func subscriptionExists(ctx context.Context, q shardmgr.Querier, name string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_subscription
		WHERE subname = $1 AND subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))`, name).Scan(&ok)
	return ok, err
}

// dropSlot drops replication slot name on the source when it exists,
// ending the walsender that still holds it.
func dropSlot(ctx context.Context, q pg.Execer, name string) error {
	for i := 0; ; i++ {
		var exists, active bool
		var pid *int32
		err := q.QueryRow(ctx, `SELECT true, active, active_pid FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, name).Scan(&exists, &active, &pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if active && pid != nil {
			if i > 50 {
				return fmt.Errorf("replication slot %s stays in use by process %d", name, *pid)
			}
			if i > 10 {
				_, _ = q.Exec(ctx, `SELECT pg_catalog.pg_terminate_backend($1)`, *pid)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		_, err = q.Exec(ctx, `SELECT pg_catalog.pg_drop_replication_slot($1)`, name)
		var pe *pgconn.PgError
		if err != nil && errors.As(err, &pe) && (pe.Code == "55006" || pe.Code == "42704") && i <= 50 { // in use, or just gone
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return err
	}
}

// dropReplication removes a move's subscription, slot, publication, mark
// tables and change logs. It is idempotent.
func dropReplication(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) error {
	if err := dropSubscription(ctx, dst, rec.replName); err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	if err := dropSlot(ctx, src, rec.replName); err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	if _, err := src.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{rec.replName}.Sanitize()); err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	for _, db := range []*pgxpool.Pool{src, dst} {
		if _, err := db.Exec(ctx, `DROP TABLE IF EXISTS `+markTable(rec)); err != nil {
			return fmt.Errorf("drop mark table: %w", err)
		}
		if err := dropDelta(ctx, db, rec); err != nil {
			return fmt.Errorf("drop change log: %w", err)
		}
	}
	return nil
}

// dropSubscription removes the target's subscription without touching
// the source (its slot is dropped there separately, so that a source that
// is unreachable does not block the target).
func dropSubscription(ctx context.Context, q pg.Execer, name string) error {
	ok, err := subscriptionExists(ctx, q, name)
	if err != nil || !ok {
		return err
	}
	n := pgx.Identifier{name}.Sanitize()
	for _, sql := range []string{`ALTER SUBSCRIPTION ` + n + ` DISABLE`, `ALTER SUBSCRIPTION ` + n + ` SET (slot_name = NONE)`, `DROP SUBSCRIPTION ` + n} {
		if _, err := q.Exec(ctx, sql); err != nil {
			return fmt.Errorf("drop subscription %s: %w", name, err)
		}
	}
	return nil
}

// replicationLag is how far the source's WAL is ahead of what the target
// confirmed, in bytes.
func replicationLag(ctx context.Context, src shardmgr.Querier, slot string) (int64, error) {
	var lag *int64
	err := src.QueryRow(ctx, `SELECT (pg_catalog.pg_current_wal_lsn() - confirmed_flush_lsn)::bigint
		FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("replication slot %s is missing on the source", slot)
	}
	if err != nil {
		return 0, err
	}
	if lag == nil {
		return -1, nil
	}
	return *lag, nil
}

// catchUp waits for the initial copy of every table and for the lag to
// fall under CatchupLag.
func (mo *mover) catchUp(ctx context.Context, rec *MoveRecord) error {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var tables, ready int
		var errs int64
		err := dst.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE r.srsubstate = 'r'),
				coalesce((SELECT apply_error_count + sync_error_count FROM pg_catalog.pg_stat_subscription_stats st WHERE st.subid = s.oid), 0)
			FROM pg_catalog.pg_subscription s LEFT JOIN pg_catalog.pg_subscription_rel r ON r.srsubid = s.oid
			WHERE s.subname = $1 AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
			GROUP BY s.oid`, rec.replName).Scan(&tables, &ready, &errs)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("target %s: subscription %s is missing", rec.To, rec.replName)
		}
		if err != nil {
			return fmt.Errorf("target %s: %w", rec.To, err)
		}
		if errs > 0 {
			return fmt.Errorf("target %s: logical replication reported %d errors (see the target server's log)", rec.To, errs)
		}
		lag, err := replicationLag(ctx, src, rec.replName)
		if err != nil {
			return fmt.Errorf("source %s: %w", rec.From, err)
		}
		// Rows on the target so far, from its statistics (they trail by
		// up to a second): progress only.
		var rows int64
		_ = dst.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_catalog.pg_stat_user_tables WHERE schemaname = $1`, rec.Schema).Scan(&rows)
		mo.progress(rec, MoveProgress{Phase: PhaseCatchup, Tables: tables, Synced: ready, Rows: rows, Lag: lag})
		if ready == tables {
			near, err := mo.closeEnough(ctx, src, dst, rec)
			if err != nil {
				return err
			}
			if near {
				return setPhase(ctx, mo.catalog, rec, PhaseCatchup, "")
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// closeEnough reports whether a change on the source shows up on the
// target within CatchupDelay: the cut-over then waits about that long with
// writes refused.
func (mo *mover) closeEnough(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) (bool, error) {
	t0 := time.Now()
	n, err := bumpMark(ctx, src, rec)
	if err != nil {
		return false, fmt.Errorf("source %s: %w", rec.From, err)
	}
	wctx, cancel := context.WithTimeout(ctx, mo.opts.CatchupDelay)
	err = waitMark(wctx, dst, rec, n)
	cancel()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	return err == nil && time.Since(t0) <= mo.opts.CatchupDelay, nil
}

// prepareCutover, for an online move, scans the copy on both hosts before
// the fence (see move_delta.go) and then waits until the target is close
// behind the source again, which the scans may have slowed. Should it
// fail, the change logging it started is taken away.
func (mo *mover) prepareCutover(ctx context.Context, rec *MoveRecord) (err error) {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	t0 := time.Now()
	ps, err := mo.prescan(ctx, src, dst, rec)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			mo.dropDeltas(ctx, rec)
		}
	}()
	mo.log.Info("scanned before the fence", "id", rec.ID, "tables", len(ps.tables), "took", time.Since(t0))
	if mo.opts.afterScans != nil {
		if err := mo.opts.afterScans(ctx, src, dst); err != nil {
			return err
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		near, err := mo.closeEnough(ctx, src, dst, rec)
		if err != nil {
			return err
		}
		if near {
			rec.prescan = ps
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// fence marks the shard moving in the catalog (routers refuse writes) and
// fences the source (stale writers are refused too, and its counter
// stops).
func (mo *mover) fence(ctx context.Context, rec *MoveRecord) error {
	src, err := mo.pool(ctx, rec.From)
	if err != nil {
		return err
	}
	if rec.Mode == MoveOnline {
		if err := mo.prepareCutover(ctx, rec); err != nil {
			return err
		}
	}
	_, err = catalog.Change(ctx, mo.catalog, 0, fmt.Sprintf("move %d: shard %d moving %s -> %s", rec.ID, rec.Shard, rec.From, rec.To), func(tx pgx.Tx, gen int64) error {
		tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET state = 'moving', changed_generation = $3
			WHERE id = $1 AND host = $2 AND state IN ('active', 'moving')`, rec.Shard, rec.From, gen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("shard %d is no longer active on %s in the catalog", rec.Shard, rec.From)
		}
		_, err = tx.Exec(ctx, `UPDATE shardid.moves SET fenced_at = coalesce(fenced_at, pg_catalog.clock_timestamp()) WHERE id = $1`, rec.ID)
		return err
	})
	if err != nil {
		mo.dropDeltas(ctx, rec)
		return err
	}
	err = fence.Raise(ctx, src, rec.Schema, mo.opts.LockTimeout)
	if err == nil {
		err = pg.WithLockRetry(ctx, src, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
			_, err := fence.ClampCounter(ctx, tx, rec.Schema, rec.Shard)
			return err
		})
	}
	if err != nil {
		// The catalog says moving: the caller lifts that.
		rec.Phase = PhaseFenced
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	return setPhase(ctx, mo.catalog, rec, PhaseFenced, "")
}

// unfenceSource gives a fenced source back: fence down, counter running,
// the catalog's state active, and the journal at the phase before the
// fence. The catalog is changed last, so that routers send writes only to
// a source that takes them.
func (mo *mover) unfenceSource(ctx context.Context, rec *MoveRecord) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	src, err := mo.pool(ctx, rec.From)
	if err != nil {
		return err
	}
	if err := mo.unfenceSourceHost(ctx, src, rec); err != nil {
		return err
	}
	mo.dropDeltas(ctx, rec)
	back := PhaseCatchup
	if rec.Mode == MoveOffline {
		back = PhaseSchema
	}
	_, err = catalog.Change(ctx, mo.catalog, 0, fmt.Sprintf("move %d: shard %d back to active on %s", rec.ID, rec.Shard, rec.From), func(tx pgx.Tx, gen int64) error {
		if _, err := tx.Exec(ctx, `UPDATE shardid.shards SET state = 'active', changed_generation = $3
			WHERE id = $1 AND host = $2 AND state = 'moving'`, rec.Shard, rec.From, gen); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE shardid.moves SET phase = $2, fenced_at = NULL, updated_at = pg_catalog.clock_timestamp() WHERE id = $1`, rec.ID, string(back))
		return err
	})
	if err != nil {
		return err
	}
	rec.Phase = back
	return nil
}

// dropMoveTriggers drops the fence's and the change log's triggers from a
// host's copy of the shard once no VACUUM works on its tables: DDL that
// takes the tables' locks, each try holding writers back for at most
// LockTimeout.
func (mo *mover) dropMoveTriggers(ctx context.Context, db *pgxpool.Pool, rec *MoveRecord) error {
	return pg.WithTablesIdle(ctx, db, rec.Schema, func() error {
		return pg.WithLockRetry(ctx, db, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
			if err := dropDelta(ctx, tx, rec); err != nil {
				return err
			}
			return fence.Remove(ctx, tx, rec.Schema)
		})
	})
}

func (mo *mover) unfenceSourceHost(ctx context.Context, src *pgxpool.Pool, rec *MoveRecord) error {
	var has bool
	if err := src.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, pgx.Identifier{rec.Schema}.Sanitize()).Scan(&has); err != nil || !has {
		return err
	}
	// Writes first, by function swaps and the counter's range (no table
	// lock); then the triggers go, as far as the tables let them.
	err := pg.WithLockRetry(ctx, src, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := muteDelta(ctx, tx, rec); err != nil {
			return err
		}
		if err := fence.Func(ctx, tx, rec.Schema, false); err != nil {
			return err
		}
		if rec.counterMax != nil {
			return fence.UnclampCounter(ctx, tx, rec.Schema, *rec.counterMax)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := mo.dropMoveTriggers(ctx, src, rec); err != nil {
		mo.log.Warn("the source takes writes again; its open fence and change-log triggers stay until the move is run or aborted again", "id", rec.ID, "host", rec.From, "err", err)
	}
	return nil
}

// copyOffline copies every table from the fenced source with COPY, in one
// transaction on the target.
func (mo *mover) copyOffline(ctx context.Context, rec *MoveRecord) error {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	tables, err := dataTables(ctx, src, rec.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	var rows int64
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config($1, 'on', true)`, fence.Bypass); err != nil {
			return err
		}
		for _, t := range tables {
			qt := pgx.Identifier{rec.Schema, t}.Sanitize()
			if _, err := tx.Exec(ctx, `TRUNCATE `+qt); err != nil {
				return err
			}
			n, err := copyTable(ctx, src, tx.Conn().PgConn(), rec.Schema, t)
			if err != nil {
				return fmt.Errorf("copy %s: %w", qt, err)
			}
			rows += n
			mo.progress(rec, MoveProgress{Phase: PhaseCopy, Tables: len(tables), Rows: rows, Lag: -1})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	rec.Rows = rows
	return setPhase(ctx, mo.catalog, rec, PhaseCopy, "rows_copied = $3", rows)
}

// copyTable streams one table from the source into the target with COPY
// in binary format, column by name.
func copyTable(ctx context.Context, src *pgxpool.Pool, dst *pgconn.PgConn, schema, table string) (int64, error) {
	rows, err := src.Query(ctx, `SELECT pg_catalog.quote_ident(a.attname) FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum`,
		pgx.Identifier{schema, table}.Sanitize())
	if err != nil {
		return 0, err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	list := strings.Join(cols, ", ")
	qt := pgx.Identifier{schema, table}.Sanitize()
	conn, err := src.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	pr, pw := io.Pipe()
	var g errgroup.Group
	g.Go(func() error {
		_, err := conn.Conn().PgConn().CopyTo(ctx, pw, fmt.Sprintf(`COPY (SELECT %s FROM ONLY %s) TO STDOUT (FORMAT binary)`, list, qt))
		pw.CloseWithError(err)
		return err
	})
	tag, err := dst.CopyFrom(ctx, pr, fmt.Sprintf(`COPY %s (%s) FROM STDIN (FORMAT binary)`, qt, list))
	pr.CloseWithError(err)
	if gerr := g.Wait(); gerr != nil && err == nil {
		err = gerr
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// verifyCopy makes sure the target has every change (online: the slot
// confirmed the source's WAL position taken after the fence), carries the
// counter over and compares row counts and checksums table by table.
func (mo *mover) verifyCopy(ctx context.Context, rec *MoveRecord) error {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	if rec.Mode == MoveOnline {
		wctx, cancel := context.WithTimeout(ctx, mo.opts.CutoverTimeout)
		n, err := bumpMark(wctx, src, rec)
		if err == nil {
			err = waitMark(wctx, dst, rec, n)
		}
		if err == nil {
			err = flushWAL(wctx, dst)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("wait for the target to apply every change made before the fence: %w", err)
		}
	}
	if err := mo.carryCounter(ctx, src, dst, rec); err != nil {
		return err
	}
	sv, _, err := migrate.ReadShardVersion(ctx, src, rec.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	if sv != rec.Version {
		return fmt.Errorf("%w: the source was migrated to version %d during the move (the target is at %d)", ErrMoveCheck, sv, rec.Version)
	}
	tables, err := dataTables(ctx, src, rec.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	t0 := time.Now()
	var rows int64
	checked := false
	if ps := rec.prescan; ps != nil && ps.sameTables(tables) {
		if rows, checked, err = compareDelta(ctx, src, dst, rec, ps); err != nil {
			return err
		}
	}
	how := "changes since the scans"
	if !checked {
		how = "full scans"
		if rows, err = compareTables(ctx, src, dst, rec.Schema, tables); err != nil {
			return err
		}
	}
	mo.log.Info("checked", "id", rec.ID, "tables", len(tables), "rows", rows, "from", how, "took", time.Since(t0))
	rec.Rows = rows
	mo.progress(rec, MoveProgress{Phase: PhaseVerified, Tables: len(tables), Rows: rows, Lag: 0})
	return setPhase(ctx, mo.catalog, rec, PhaseVerified, "rows_copied = $3", rows)
}

// markTable is the one-row table a move publishes beside the shard's
// tables, in the shardid schema of both hosts: a change to it after the
// fence that shows up on the target proves that every change committed
// before it was applied there, as the apply worker applies transactions in
// commit order.
func markTable(rec *MoveRecord) string { return pgx.Identifier{"shardid", rec.replName}.Sanitize() }

// createMarkTable creates the move's mark table on a host.
func createMarkTable(ctx context.Context, db pg.Execer, rec *MoveRecord) error {
	_, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+markTable(rec)+` (id boolean PRIMARY KEY DEFAULT true CHECK (id), n bigint NOT NULL)`)
	return err
}

// bumpMark changes the move's mark on the source and returns its value.
func bumpMark(ctx context.Context, src *pgxpool.Pool, rec *MoveRecord) (int64, error) {
	mark := markTable(rec)
	var n int64
	err := src.QueryRow(ctx, `INSERT INTO `+mark+` (n) VALUES (1) ON CONFLICT (id) DO UPDATE SET n = `+mark+`.n + 1 RETURNING n`).Scan(&n)
	return n, err
}

// waitMark waits until the target shows mark n.
func waitMark(ctx context.Context, dst *pgxpool.Pool, rec *MoveRecord, n int64) error {
	for {
		var got *int64
		if err := dst.QueryRow(ctx, `SELECT max(n) FROM `+markTable(rec)).Scan(&got); err != nil {
			return err
		}
		if got != nil && *got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// flushWAL makes what the target's apply worker committed (asynchronously)
// durable: a synchronous commit flushes the WAL before it.
func flushWAL(ctx context.Context, db *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on; SELECT pg_catalog.txid_current()`)
		return err
	})
}

// carryCounter raises the target's counter past the source's last value
// and every id stored, and its other sequences to the source's, so the
// target can never repeat an id the source handed out, whatever its clock.
func (mo *mover) carryCounter(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) error {
	seq := pgx.Identifier{rec.Schema, shsql.CounterName}.Sanitize()
	var last int64
	if err := src.QueryRow(ctx, `SELECT last_value FROM `+seq).Scan(&last); err != nil {
		return fmt.Errorf("source %s: read %s: %w", rec.From, seq, err)
	}
	floor := shardschema.IDOfCounter(mo.m.Layout, last, rec.Shard)
	stored, err := shardschema.MaxStoredID(ctx, dst, rec.Schema)
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	floor = max(floor, stored)
	if rec.counterMax == nil {
		return fmt.Errorf("move %d: the journal has no counter range (phase schema not recorded)", rec.ID)
	}
	// The target's counter stays stopped until the flip: it is let run
	// only for the carry, in one transaction that holds the counter's
	// lock, so no id leaves the incoming copy before the flip.
	// force: the floor comes from ids the source really handed out, which
	// may lie beyond the hour next_id_advance allows ahead of this host's
	// clock (a source clock ahead, an earlier forced advance).
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if err := fence.UnclampCounter(ctx, tx, rec.Schema, *rec.counterMax); err != nil {
			return err
		}
		var got int64
		if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT %s($1, force => true)`, pgx.Identifier{rec.Schema, shsql.AdvanceName}.Sanitize()), floor).Scan(&got); err != nil {
			return err
		}
		_, err := fence.ClampCounter(ctx, tx, rec.Schema, rec.Shard)
		return err
	})
	if err != nil {
		return fmt.Errorf("target %s: carry the counter: %w", rec.To, err)
	}
	// Other sequences in the schema (bigserial columns): logical
	// replication does not carry them either.
	rows, err := src.Query(ctx, `SELECT sequencename, last_value FROM pg_catalog.pg_sequences
		WHERE schemaname = $1 AND sequencename <> $2 AND last_value IS NOT NULL`, rec.Schema, shsql.CounterName)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	type seqVal struct {
		name string
		last int64
	}
	vals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (seqVal, error) {
		var v seqVal
		return v, r.Scan(&v.name, &v.last)
	})
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	for _, v := range vals {
		q := pgx.Identifier{rec.Schema, v.name}.Sanitize()
		if _, err := dst.Exec(ctx, fmt.Sprintf(`SELECT pg_catalog.setval(%s, $1) FROM %s WHERE NOT is_called OR last_value < $1`, pg.QuoteLiteral(q), q), v.last); err != nil {
			return fmt.Errorf("target %s: carry %s: %w", rec.To, q, err)
		}
	}
	return nil
}

// tableSum is a table's row count and order-independent checksum.
type tableSum struct {
	rows int64
	sum  string
}

// checksum reads a table's count and the sum of a 64-bit hash of every
// row: hash_record_extended over the row's columns, each hashed by its
// type's own hash function (cheap: no conversion to text). A table with a
// column type that has no hash function (json, point) is hashed over its
// rows' text instead, with the settings that shape that text fixed.
func checksum(ctx context.Context, db *pgxpool.Pool, table string) (tableSum, error) {
	s, err := scanTable(ctx, db, table, false)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42883" { // undefined_function: a column type without hashing
		s, err = scanTable(ctx, db, table, true)
	}
	return s.tableSum, err
}

// compareTables compares every table's count and checksum on both hosts,
// the hosts and tables in parallel, and returns the rows counted.
func compareTables(ctx context.Context, src, dst *pgxpool.Pool, schema string, tables []string) (int64, error) {
	sums := make([][2]tableSum, len(tables))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, t := range tables {
		qt := pgx.Identifier{schema, t}.Sanitize()
		for side, db := range []*pgxpool.Pool{src, dst} {
			g.Go(func() error {
				s, err := checksum(gctx, db, qt)
				if err != nil {
					return fmt.Errorf("checksum %s: %w", qt, err)
				}
				sums[i][side] = s
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return sameSums(tables, sums)
}

// flip lifts the target's fence and points the catalog at it; the
// journal's phase changes in the same catalog transaction.
func (mo *mover) flip(ctx context.Context, rec *MoveRecord) error {
	dst, err := mo.pool(ctx, rec.To)
	if err != nil {
		return err
	}
	// Function swaps and the counter's range only: no table lock to wait
	// for while writes are refused. Cleanup drops the triggers.
	err = pg.WithLockRetry(ctx, dst, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := muteDelta(ctx, tx, rec); err != nil {
			return err
		}
		if err := fence.Func(ctx, tx, rec.Schema, false); err != nil {
			return err
		}
		if rec.counterMax == nil {
			return fmt.Errorf("move %d: the journal has no counter range (phase schema not recorded)", rec.ID)
		}
		return fence.UnclampCounter(ctx, tx, rec.Schema, *rec.counterMax)
	})
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	rec.targetOpened = true
	var refused int64
	gen, err := catalog.Change(ctx, mo.catalog, 0, fmt.Sprintf("move %d: shard %d %s -> %s", rec.ID, rec.Shard, rec.From, rec.To), func(tx pgx.Tx, gen int64) error {
		if mo.opts.flipCatalog != nil {
			if err := mo.opts.flipCatalog(); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET host = $2, state = 'active', changed_generation = $4
			WHERE id = $1 AND host = $3 AND state = 'moving'`, rec.Shard, rec.To, rec.From, gen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("shard %d is no longer moving from %s in the catalog", rec.Shard, rec.From)
		}
		return tx.QueryRow(ctx, `UPDATE shardid.moves SET phase = 'flipped', flip_generation = $2, updated_at = pg_catalog.clock_timestamp(),
				refused_ms = (extract(epoch FROM pg_catalog.clock_timestamp() - fenced_at) * 1000)::bigint
			WHERE id = $1 AND phase = 'verified' RETURNING refused_ms`, rec.ID, gen).Scan(&refused)
	})
	if err != nil {
		return err
	}
	rec.Phase, rec.flipGen, rec.refusedMS = PhaseFlipped, &gen, &refused
	mo.log.Info("flipped", "id", rec.ID, "shard", rec.Shard, "to", rec.To, "generation", gen, "refused", time.Duration(refused)*time.Millisecond)
	return nil
}

// refenceTarget raises the target's fence and stops its counter again
// after a flip that opened them and then failed in the catalog.
func (mo *mover) refenceTarget(ctx context.Context, rec *MoveRecord) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	dst, err := mo.pool(ctx, rec.To)
	if err != nil {
		return err
	}
	err = pg.WithLockRetry(ctx, dst, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error {
		if err := fence.Func(ctx, tx, rec.Schema, true); err != nil {
			return err
		}
		_, err := fence.ClampCounter(ctx, tx, rec.Schema, rec.Shard)
		return err
	})
	if err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	rec.targetOpened = false
	return nil
}

// cleanup records the shard as the target's own, removes the replication
// objects and retires the source's copy: renamed and still fenced, or
// dropped when it is not to be kept.
func (mo *mover) cleanup(ctx context.Context, rec *MoveRecord) error {
	src, dst, err := mo.ends(ctx, rec)
	if err != nil {
		return err
	}
	gen := *rec.flipGen
	if _, err := dst.Exec(ctx, `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES ($1, $2, 'active', $3)
		ON CONFLICT (shard) DO UPDATE SET schema_name = EXCLUDED.schema_name, state = 'active', generation = EXCLUDED.generation`,
		rec.Shard, rec.Schema, gen); err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	if _, err := dst.Exec(ctx, fmt.Sprintf(`COMMENT ON SCHEMA %s IS NULL`, pgx.Identifier{rec.Schema}.Sanitize())); err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	// The flip left the target's fence and change log open; their
	// triggers go now, writes flowing.
	if err := mo.dropMoveTriggers(ctx, dst, rec); err != nil {
		return fmt.Errorf("target %s: %w", rec.To, err)
	}
	if err := dropReplication(ctx, src, dst, rec); err != nil {
		return err
	}
	retired := fence.RetiredSchema(rec.Schema, gen)
	drop := rec.keep < 0
	err = pgx.BeginFunc(ctx, src, func(tx pgx.Tx) error {
		var has bool
		if err := tx.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, pgx.Identifier{rec.Schema}.Sanitize()).Scan(&has); err != nil {
			return err
		}
		if has {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = 0`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER SCHEMA %s RENAME TO %s`, pgx.Identifier{rec.Schema}.Sanitize(), pgx.Identifier{retired}.Sanitize())); err != nil {
				return err
			}
		}
		if drop {
			if _, err := tx.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{retired}.Sanitize()+` CASCADE`); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM shardid.local_shards WHERE shard = $1 AND schema_name = $2`, rec.Shard, rec.Schema)
		return err
	})
	if err != nil {
		return fmt.Errorf("source %s: retire %s: %w", rec.From, rec.Schema, err)
	}
	extra := `retired_schema = $3, finished_at = pg_catalog.clock_timestamp(), keep_until = pg_catalog.clock_timestamp() + $4 * interval '1 millisecond'`
	if drop {
		extra += `, retired_dropped_at = pg_catalog.clock_timestamp()`
	}
	rec.Retired = retired
	return setPhase(ctx, mo.catalog, rec, PhaseCleaned, extra, retired, max(rec.keep.Milliseconds(), 0))
}

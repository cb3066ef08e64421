package rebalance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// DefaultKeep is how long a moved shard's old copy is kept, renamed and
// fenced, before shardid rebalance cleanup drops it.
const DefaultKeep = 24 * time.Hour

// Defaults of MoveOptions' bounds on a move's waits.
const (
	DefaultWorkerStartTimeout = 30 * time.Second
	DefaultCatchupTimeout     = 30 * time.Minute
	DefaultCatchupDelay       = 100 * time.Millisecond
	DefaultCutoverTimeout     = 30 * time.Second
	DefaultLockTimeout        = time.Second
)

// MoveOptions adjust a move. The zero value moves online, keeps the old
// copy for DefaultKeep, and needs no migrations directory for shards that
// were never migrated.
type MoveOptions struct {
	// Mode is MoveOnline (the zero value), MoveOffline or MoveAuto. A
	// resumed move keeps the mode it started with.
	//
	// Online stays the default rather than auto: offline refuses writes
	// to the shard for the whole copy, minutes for a big one, and that is
	// the operator's call to make, not something a server setting should
	// decide behind their back. With online, a host that cannot run it is
	// refused before anything changes, with the ways out; auto is one
	// flag away for those who accept the offline moves.
	Mode MoveMode
	// Migrations is the directory of the shard's tern migrations: the
	// target's schema is built by running them up to the source's version.
	// Needed when that version is above 0.
	Migrations *migrate.MigrationSet
	// Keep is how long the source's old copy is kept, renamed
	// shard_NNNN_moved_gG and fenced, before Cleanup drops it: zero (or
	// less) drops it as soon as the move is done. Zero (nil) means
	// DefaultKeep (24h).
	Keep *time.Duration
	// CatchupDelay is how quickly a change on the source must show up on
	// the target before an online move cuts over: about how long the
	// cut-over then refuses writes. Zero means DefaultCatchupDelay (100ms).
	CatchupDelay time.Duration
	// CutoverTimeout bounds the cut-over, while writes are refused: when
	// the target has not received every change by then, the move gives up,
	// lifts the fence and leaves the source serving. Zero means
	// DefaultCutoverTimeout (30s).
	CutoverTimeout time.Duration
	// WorkerStartTimeout bounds the wait for the target's server to start
	// the apply worker of an online move's subscription: when none runs
	// by then, the move fails naming the cause (and at once when the
	// target's logical replication worker slots are all taken). Zero
	// means DefaultWorkerStartTimeout (30s).
	WorkerStartTimeout time.Duration
	// CatchupTimeout bounds an online move's catch-up: the wait, before
	// the fence, for the target to follow the source closely. Zero means
	// DefaultCatchupTimeout (30m).
	CatchupTimeout time.Duration
	// LockTimeout bounds each wait for a table lock when the fence goes up
	// (the attempt is retried). Zero means DefaultLockTimeout (1s).
	LockTimeout time.Duration
	// ConnInfo returns the libpq connection string the target's server
	// uses to reach the source host for logical replication. Nil builds one
	// from the host's DSN in the cluster file (host, port, dbname, user,
	// password, and the DSN's TLS settings: sslmode, sslrootcert, sslcert,
	// sslkey...).
	ConnInfo func(source shardmgr.Host) (string, error)
	// ConnInfoPassword, ConnInfoPasswordOmit, leaves the source's password
	// out of the conninfo that ConnInfo's default builds (the target's
	// pg_subscription would hold it): the target's server then connects
	// with a .pgpass file of its own, a certificate or trust. It is
	// refused (ErrConnInfoPasswordNeeded), before anything is copied,
	// where the mover's role on the target is not a superuser.
	ConnInfoPassword ConnInfoPassword
	// Progress, when set, is called as a move advances. Calls for one move
	// are serialised; several moves may call it concurrently.
	Progress func(MoveProgress)
	// Logger receives a line per phase. Zero means the handle's logger
	// (cluster.WithLogger).
	Logger *slog.Logger

	// hooks are the tests' levers (move_hooks.go); zero in every other use.
	hooks
}

// MoveProgress is where one move stands.
type MoveProgress struct {
	MoveRef
	Phase Phase // the phase being worked towards
	// Step is Phase's place among the Steps phases of the move's mode
	// (1..Steps), for a progress bar.
	Step, Steps int
	Tables      int   // tables of the shard
	Synced      int   // tables whose initial copy is done (online)
	Rows        int64 // rows copied or verified so far
	Bytes       int64 // the shard's size on the source
	Lag         int64 // replication lag in bytes of WAL (online), -1 when unknown
}

// MoveResult is what one move did. JSON has the fields below.
type MoveResult struct {
	MoveRef
	Mode  MoveMode `json:"mode"`
	Phase Phase    `json:"phase"`
	Rows  int64    `json:"rows"`
	Bytes int64    `json:"bytes"`
	// Refused is how long the move refused writes to the shard, as the
	// journal records it: from the fence (the catalog marking the shard
	// moving) to the target's opening after the flip, or to the source's
	// give-back when the move failed after its fence, whatever happened
	// in between; a move fenced again after a give-back adds the windows
	// (JSON: refused_ms).
	Refused time.Duration `json:"-"`
	// Elapsed is the time this run spent on the move (JSON: elapsed_ms).
	Elapsed time.Duration `json:"-"`
	// Generation is the catalog generation of the flip.
	Generation    int64  `json:"generation"`
	RetiredSchema string `json:"retired_schema,omitempty"`
	// ModeReason says why a move in auto mode went offline.
	ModeReason string `json:"mode_reason,omitempty"`
	// Err is why this run of the move failed (JSON: its message, "error").
	Err error `json:"-"`
}

// MarshalJSON writes the durations in milliseconds under their keys of
// old (refused_ms, elapsed_ms) and Err as its message under "error".
func (r MoveResult) MarshalJSON() ([]byte, error) {
	type plain MoveResult
	return json.Marshal(struct {
		plain
		RefusedMS int64  `json:"refused_ms"`
		ElapsedMS int64  `json:"elapsed_ms"`
		Error     string `json:"error,omitempty"`
	}{plain(r), r.Refused.Milliseconds(), r.Elapsed.Milliseconds(), oneLine(r.Err)})
}

// oneLine is err as the journal records it, "" for nil.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return pg.OneLine(err)
}

// errStopped is returned by the stopAfter test hook.
var errStopped = errors.New("stopped after phase (test)")

// errCrashed is returned by the crashAt test hook; it is an errStopped:
// the mover does nothing more for the move, as if killed.
var errCrashed = fmt.Errorf("%w: crashed in the cut-over", errStopped)

// Points of the cut-over where a test may crash the mover (crashAt).
const (
	crashFlipCommitted = "flip-committed" // the catalog names the target, which is not open yet
	crashTargetOpened  = "target-opened"  // the target was opened, nothing after
)

// hangAt is set only in a build with the shardid_crashtest tag
// (move_crashtest.go): called at each crash point, it may block the
// process there for good, so that a test kills it with kill -9 at that
// point.
var hangAt func(point string)

// crashPoint returns errCrashed when a test crashes the mover at point.
func (mo *mover) crashPoint(point string) error {
	if hangAt != nil {
		hangAt(point)
	}
	if mo.opts.crashAt == point {
		return errCrashed
	}
	return nil
}

// mover runs moves of one cluster through its handle, which holds the
// catalog pool and a pool per host.
type mover struct {
	c       *cluster.Cluster
	cfg     *shardmgr.Config
	catalog *pgxpool.Pool
	m       *shardmgr.ShardMap
	opts    MoveOptions
	log     *slog.Logger

	// copies holds a token per table copy running (copyTablesAll).
	copies chan struct{}

	// copied holds what an online move's copy knows of its tables by
	// construction, by move id, from the copy to the cut-over of this
	// run (cutover_delta.go); taking a move's change log away forgets it.
	copiedMu sync.Mutex
	copied   map[int64]*prescan
}

// keepCopied keeps what move id's copy knows for its cut-over.
func (mo *mover) keepCopied(id int64, ps *prescan) {
	mo.copiedMu.Lock()
	defer mo.copiedMu.Unlock()
	if mo.copied == nil {
		mo.copied = map[int64]*prescan{}
	}
	mo.copied[id] = ps
}

// takeCopied returns what move id's copy knew, once (nil: nothing kept).
func (mo *mover) takeCopied(id int64) *prescan {
	mo.copiedMu.Lock()
	defer mo.copiedMu.Unlock()
	ps := mo.copied[id]
	delete(mo.copied, id)
	return ps
}

// keepOf is how long a move's old copy is kept: DefaultKeep unless the
// options say.
func keepOf(opts MoveOptions) time.Duration {
	if opts.Keep == nil {
		return DefaultKeep
	}
	return max(*opts.Keep, 0)
}

func newMover(ctx context.Context, c *cluster.Cluster, opts MoveOptions) (*mover, error) {
	// A move holds its lock session on the catalog, and copies with a
	// source and a target connection at once.
	if err := c.Need(2, "a move"); err != nil {
		return nil, err
	}
	if opts.Mode == "" {
		opts.Mode = MoveOnline
	}
	if opts.Mode != MoveOnline && opts.Mode != MoveOffline && opts.Mode != MoveAuto {
		return nil, fmt.Errorf("move mode %q: want online, offline or auto", opts.Mode)
	}
	if opts.CatchupDelay <= 0 {
		opts.CatchupDelay = DefaultCatchupDelay
	}
	if opts.CutoverTimeout <= 0 {
		opts.CutoverTimeout = DefaultCutoverTimeout
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.WorkerStartTimeout <= 0 {
		opts.WorkerStartTimeout = DefaultWorkerStartTimeout
	}
	if opts.CatchupTimeout <= 0 {
		opts.CatchupTimeout = DefaultCatchupTimeout
	}
	log := opts.Logger
	if log == nil {
		log = c.Logger()
	}
	// The handle's catalog pool, once its schema suits a writer: a move
	// never migrates the catalog (shardid init does), and refuses one
	// older than this binary with ErrCatalogTooOld.
	catalog, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	m, err := shardmgr.ReadMap(ctx, catalog)
	if err != nil {
		return nil, err
	}
	mo := &mover{c: c, cfg: c.Config(), catalog: catalog, m: m, opts: opts, log: log,
		copies: make(chan struct{}, copyTablesAll)}
	if err := mo.refuseStaleCatalog(ctx); err != nil {
		return nil, err
	}
	return mo, nil
}

// pool returns the handle's pool on host name of the cluster file: a move
// writes the host's shardid.local_shards, so only of the schema this
// binary knows (checked once per handle).
func (mo *mover) pool(ctx context.Context, name string) (*pgxpool.Pool, error) {
	return mo.c.Host(ctx, name, shardmgr.UseWrite)
}

// MoveShard moves logical shard shard to host to, online unless
// opts.Mode says offline, and returns what it did. The cluster file's
// hosts must be the catalog's (ErrHostsNotApplied: a host the file adds
// or changes is applied by install.Init first). A shard with
// an unfinished move to the same host resumes it; to another host it is
// ErrMoveOpen.
//
// Any failure before the flip (the catalog transaction that places the
// shard on the target: the point of no return) leaves the source serving
// as before (the fence is lifted when the cut-over fails) and the target's
// copy, never opened, removable with AbortMove; the journal records the
// error. A failure after it leaves the shard serving on the target and is
// ErrNotCleaned: running the move again, Apply or Cleanup finishes it.
// After the flip, moving the shard back is a move like any other.
func MoveShard(ctx context.Context, c *cluster.Cluster, shard int, to string, opts MoveOptions) (*MoveResult, error) {
	p, err := prepareMove(ctx, c, shard, to, opts)
	if err != nil {
		return nil, err
	}
	mo, plan, rec := p.mo, p.plan, p.rec
	if rec == nil {
		recs, err := mo.journal(ctx, plan.Moves)
		if err != nil {
			return nil, err
		}
		rec = recs[0]
	}
	res, err := mo.run(ctx, rec)
	if res != nil {
		if len(plan.Moves) > 0 {
			res.ModeReason = plan.Moves[0].ModeReason
		}
	}
	if err != nil && !errors.Is(err, ErrMoveBusy) && !errors.Is(err, errStopped) {
		mo.stopSubscriptions(ctx, []*MoveRecord{rec})
	}
	return res, err
}

// preparedMove is what a move settles before it changes anything: the
// mover, the plan of its one move (empty when it resumes rec, the
// journaled move of the shard) with the preflight's checks.
type preparedMove struct {
	mo   *mover
	plan *Plan
	rec  *MoveRecord
}

// prepareMove checks a move of shard to host to and runs its preflight:
// MoveShard's steps before the journal, which DryRunMove stops after.
func prepareMove(ctx context.Context, c *cluster.Cluster, shard int, to string, opts MoveOptions) (*preparedMove, error) {
	cfg := c.Config()
	h, ok := cfg.Host(to)
	if !ok {
		return nil, fmt.Errorf("move shard %d to %s: %w (not in the cluster file %s)", shard, to, shardmgr.ErrUnknownHost, cfg.Path)
	}
	if h.Drain {
		return nil, fmt.Errorf("move shard %d to %s: the host is marked drain in %s", shard, to, cfg.Path)
	}
	if err := cfg.CheckShard(shard); err != nil {
		return nil, err
	}
	mo, err := newMover(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	open, err := readMoves(ctx, mo.catalog, `shard = $1 AND `+catalog.OpenMoves, shard)
	if err != nil {
		return nil, err
	}
	var rec *MoveRecord
	pm := PlannedMove{Shard: shard, To: to}
	if len(open) > 0 {
		rec = open[0]
		if rec.To != to {
			return nil, &shardmgr.ShardError{Shard: shard, Err: fmt.Errorf("%w: move %d to %s is in phase %s", ErrMoveOpen, rec.ID, rec.To, rec.Phase)}
		}
	} else {
		pm.From = mo.m.Shards[shard].Host
		if pm.From == to {
			return nil, fmt.Errorf("shard %d is already on %s", shard, to)
		}
	}
	// The preflight, before the hosts are registered or the move
	// journaled: a failed check changes nothing.
	plan := &Plan{Moves: []PlannedMove{pm}}
	if rec != nil {
		plan.Moves = nil
	}
	if !opts.skipPreflight {
		if err := plan.preflight(ctx, mo.c, mo.m, mo.pool, PlanOptions{Mode: opts.Mode, Parallel: 1, Migrations: opts.Migrations, moving: true}, open); err != nil {
			return nil, err
		}
	}
	if err := mo.hostsAgree(); err != nil {
		return nil, err
	}
	if opts.Mode != MoveOffline && (rec == nil || rec.Mode == MoveOnline) {
		// Refused before the journal, not after a copy.
		if dst, err := mo.pool(ctx, to); err == nil {
			if err := mo.checkConnInfoPassword(ctx, dst, to); err != nil {
				return nil, err
			}
		}
	}
	return &preparedMove{mo: mo, plan: plan, rec: rec}, nil
}

// hostsAgree refuses to work from a cluster file whose hosts the catalog
// does not have yet (a new host, a new DSN, a drain mark): the catalog is
// where hosts are at run time, and the file's proposal is applied by
// init, never as a side effect of a move. A host only the catalog still
// has is not in the way (init removes it once it holds nothing).
func (mo *mover) hostsAgree() error {
	var diffs []string
	for _, d := range catalog.CompareHosts(mo.m, mo.cfg) {
		if d.Kind != catalog.HostRemoved {
			diffs = append(diffs, d.Describe(mo.cfg))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrHostsNotApplied, mo.cfg.Path, strings.Join(diffs, "; "))
	}
	return nil
}

// journal records planned moves in one catalog transaction, after
// checking them against the map.
func (mo *mover) journal(ctx context.Context, moves []PlannedMove) ([]*MoveRecord, error) {
	// A host whose own schema this binary may not write, or whose schema
	// shardid holds what another role made, is refused before anything
	// is journaled; other failures to reach a host are the move's,
	// recorded in its journal row as before.
	for _, pm := range moves {
		for _, h := range []string{pm.From, pm.To} {
			var ve *shardmgr.CatalogVersionError
			if _, err := mo.pool(ctx, h); errors.As(err, &ve) || errors.Is(err, pgtrust.ErrUntrusted) {
				return nil, err
			}
		}
	}
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
				return fmt.Errorf("host %s: %w", pm.To, shardmgr.ErrUnknownHost)
			}
			mode := cmp.Or(pm.Mode, mo.opts.Mode)
			if mode == MoveAuto {
				return &shardmgr.ShardError{Shard: pm.Shard, Err: errors.New("no mode chosen for the move (preflight)")}
			}
			rec, err := journalMove(ctx, tx, catalog.NewMove{
				Shard: pm.Shard, From: pm.From, To: pm.To, Mode: string(mode), Schema: s.Schema, Bytes: pm.Bytes, Keep: keepOf(mo.opts),
			})
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
	p.MoveRef = rec.MoveRef
	p.Steps = len(phases[rec.Mode]) - 1
	p.Step = slices.Index(steps(rec.Mode), p.Phase)
	if p.Bytes == 0 {
		p.Bytes = rec.Bytes
	}
	mo.opts.Progress(p)
}

// moveLockClass is the first key of the session advisory lock, on the
// catalog, that a manager holds while it runs or aborts a move (the second
// key is the move's id): 'shmv'.
const moveLockClass int32 = 0x73686d76

// lockMove takes the move's lock on a connection of its own, so that two
// managers never work on one move at once; the returned function releases
// it. The lock goes with the session if the process dies.
func (mo *mover) lockMove(ctx context.Context, rec *MoveRecord) (func(), error) {
	conn, err := mo.c.CatalogConn(ctx, cluster.Session{})
	if err != nil {
		return nil, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock($1, $2)`, moveLockClass, int32(rec.ID)).Scan(&ok); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("move %d of shard %d: %w%s", rec.ID, rec.Shard, ErrMoveBusy, moveLockHolders(ctx, conn, rec.ID))
		}
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return func() {
		// Let go before closing: the server ends a closed session (and
		// drops its locks) a moment later, and a manager that runs the
		// move right after this one must find it free.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(uctx, `SELECT pg_catalog.pg_advisory_unlock($1, $2)`, moveLockClass, int32(rec.ID))
		conn.Close(uctx)
	}, nil
}

// moveLockHolders names the sessions holding move id's lock, for an error
// ("" when they cannot be read).
func moveLockHolders(ctx context.Context, conn *pgx.Conn, id int64) string {
	hs, err := pg.AdvisoryHolders(ctx, conn, int64(moveLockClass), int64(int32(id)))
	if err != nil || len(hs) == 0 {
		return ""
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.String()
	}
	return " (held by " + strings.Join(parts, "; ") + ")"
}

// run takes the move from its journaled phase to the end of its mode's
// phase table, one step at a time, each recorded in the journal. A failed
// step leaves the shard as safe as the phase it failed from allows; see
// failed.
func (mo *mover) run(ctx context.Context, rec *MoveRecord) (*MoveResult, error) {
	start := time.Now()
	unlock, err := mo.lockMove(ctx, rec)
	if err != nil {
		return &MoveResult{MoveRef: rec.MoveRef, Mode: rec.Mode, Phase: rec.Phase, Err: err}, err
	}
	defer unlock()
	// Re-read the journal under the lock: another manager may have moved
	// it on since it was read.
	fresh, err := readMoves(ctx, mo.catalog, `id = $1`, rec.ID)
	if err != nil {
		return nil, err
	}
	*rec = *fresh[0]
	mv := &move{MoveRecord: rec}
	// res is the move as this run leaves it, with this run's error only:
	// an earlier run's, recorded in the journal, is history once the
	// move moved on.
	res := func(err error) *MoveResult {
		r := &MoveResult{MoveRef: rec.MoveRef, Mode: rec.Mode, Phase: rec.Phase,
			Rows: rec.Rows, Bytes: rec.Bytes, Elapsed: time.Since(start), RetiredSchema: rec.Retired, Err: err}
		if rec.RefusedMS != nil {
			r.Refused = time.Duration(*rec.RefusedMS) * time.Millisecond
		}
		if rec.flipGen != nil {
			r.Generation = *rec.flipGen
		}
		return r
	}
	for rec.Phase.Open() {
		if mo.opts.stopAfter != "" && rec.Phase == mo.opts.stopAfter {
			return res(errStopped), errStopped
		}
		next, ok := nextStep(rec.Mode, rec.Phase)
		if !ok {
			err := fmt.Errorf("move %d: phase %s is not one of a %s move", rec.ID, rec.Phase, rec.Mode)
			return res(err), err
		}
		mo.starting(mv, next)
		err := mo.open(ctx, mv)
		if err == nil {
			err = next.run(mo, ctx, mv)
		}
		if errors.Is(err, errStopped) {
			return res(err), err // a test's crash: nothing more is done
		}
		if err != nil {
			err = mo.stepFailed(ctx, mv, next, err)
			return res(err), err
		}
	}
	mo.log.Info("move done", "id", rec.ID, "shard", rec.Shard, "to", rec.To, "elapsed", time.Since(start))
	return res(nil), nil
}

// starting reports that mv works towards next's phase.
func (mo *mover) starting(mv *move, next step) {
	mo.progress(mv.MoveRecord, MoveProgress{Phase: next.phase, Lag: -1})
	mo.log.Info("move", "id", mv.ID, "shard", mv.Shard, "from", mv.From, "to", mv.To, "phase", next.phase)
}

// stepFailed names the move and phase in err, leaves the move as safe as
// it can (failed) and records the error in the journal.
func (mo *mover) stepFailed(ctx context.Context, mv *move, next step, err error) error {
	if mv.Phase.PastNoReturn() && next.phase != PointOfNoReturn { // a step after the flip
		err = fmt.Errorf("%w (the shard serves on %s): %w", ErrNotCleaned, mv.To, err)
	}
	err = &shardmgr.ShardError{Shard: mv.Shard, Host: mv.To, Err: fmt.Errorf("move %d (%s -> %s), phase %s: %w", mv.ID, mv.From, mv.To, next.phase, err)}
	err = mo.failed(ctx, mv, next, err)
	recordError(ctx, mo.catalog, mv.MoveRecord, err)
	return err
}

// failed leaves a move whose step towards next failed as safe as it can,
// and returns the error to record. The catalog's word decides which side
// of the point of no return (the flip's catalog transaction) the move is:
//   - past it, or perhaps past it (the flip's or a later step failed):
//     the journal is read again when the flip's answer may have been
//     lost. A flipped move's target is the shard's
//     home, which is never fenced nor its counter stopped: it is opened,
//     in case the flip stopped before it did (a target that does not
//     answer, restarting, is waited for, a minute at most), and the error (ErrNotCleaned
//     for a later step, see stepFailed) is recorded for the next run to
//     finish the move.
//     When the journal cannot be read, nothing is touched: both copies
//     stay fenced until the move is run again;
//   - before it, with the source refusing writes (fencedAfter): the
//     source is given back, and the move set back to a phase before the
//     fence, rather than leave the shard unwritable until someone
//     notices; a source that does not answer (restarting) is waited for,
//     a minute at most (unfenceSource). The target was never opened.
func (mo *mover) failed(ctx context.Context, mv *move, next step, err error) error {
	if next.phase == PointOfNoReturn || mv.Phase.PastNoReturn() {
		if !mv.Phase.PastNoReturn() { // the flip's answer may have been lost
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			fresh, rerr := readMoves(rctx, mo.catalog, `id = $1`, mv.ID)
			cancel()
			if rerr != nil {
				return errors.Join(err, fmt.Errorf("%w: whether the flip committed is unknown (the journal cannot be read: %w); both copies refuse writes until the move is run again", ErrSourceFenced, rerr))
			}
			*mv.MoveRecord = *fresh[0]
		}
		if mv.Phase.PastNoReturn() {
			// The target may be restarting (often why the step
			// failed): it is waited for, giveBackRetry at most.
			octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackRetry+time.Minute)
			defer cancel()
			oerr := mo.whileNotAnswering(octx, mv, mv.To, openWaitsMsg, fmt.Sprintf("to open shard %d there", mv.Shard), func() error {
				if err := mo.open(octx, mv); err != nil {
					return err
				}
				return mo.openTarget(octx, mv)
			})
			if oerr != nil {
				return errors.Join(err, fmt.Errorf("the catalog places the shard on %s, whose copy still refuses writes until the move is run again: %w", mv.To, oerr))
			}
			return err
		}
	}
	if sourceFenced(mv.Mode, mv.Phase) {
		if uerr := mo.unfenceSource(ctx, mv); uerr != nil {
			return errors.Join(err, fmt.Errorf("%w: shard %d still refuses writes on %s until the move is run again or aborted; lifting the fence failed too: %w", ErrSourceFenced, mv.Shard, mv.From, uerr))
		}
	}
	return err
}

package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	shsql "github.com/shardid/shardid/sql"
)

// LockClass is the first key of the catalog's session advisory lock
// that serialises shardid init runs (second key 1; see package install).
// Catalog changes do not take an advisory lock: any role that may connect
// can hold one (they need nothing beyond CONNECT), and a move's flip
// would wait for it while the shard's writes are refused. They serialise
// on the cluster row instead, which only a role that may update the
// catalog can lock.
const LockClass = 0x73686361

// DefaultLockWait bounds a catalog change's wait for the cluster row
// (another manager's change holds it for milliseconds): when it runs out
// the change gives up with a *pg.LockWaitError naming the holders.
const DefaultLockWait = 10 * time.Second

// ClusterTable is the catalog's cluster row, the lock every change takes.
const ClusterTable = "shardid.cluster"

// Change runs fn in one catalog transaction that holds the cluster row,
// checks that the generation is still want (0: any), and bumps the
// generation with a record of what changed. It returns the new generation.
// It is the one way the catalog's map changes (invariant 3: every change
// bumps the generation in one transaction). It waits at most
// DefaultLockWait for the cluster row.
func Change(ctx context.Context, pool *pgxpool.Pool, want int64, what string, fn func(tx pgx.Tx, gen int64) error) (int64, error) {
	return ChangeWithin(ctx, pool, want, DefaultLockWait, what, fn)
}

// ChangeWithin is Change waiting at most wait (zero: DefaultLockWait) for
// the cluster row and for every other lock the change takes.
func ChangeWithin(ctx context.Context, pool *pgxpool.Pool, want int64, wait time.Duration, what string, fn func(tx pgx.Tx, gen int64) error) (int64, error) {
	next, _, err := changeIf(ctx, pool, want, 0, wait, func(tx pgx.Tx, gen int64) (string, error) {
		return what, fn(tx, gen)
	})
	if err != nil {
		return 0, fmt.Errorf("catalog change (%s): %w", what, err)
	}
	return next, nil
}

// ChangeIf is Change for a caller that learns what changes only inside
// the transaction: fn returns the description of what it changed, and ""
// when it changed nothing, in which case the generation stays. Errors
// come back as fn and the catalog gave them.
func ChangeIf(ctx context.Context, pool *pgxpool.Pool, want int64, fn func(tx pgx.Tx, gen int64) (what string, err error)) (gen int64, changed bool, err error) {
	return changeIf(ctx, pool, want, 0, DefaultLockWait, fn)
}

// ChangeAbove is Change whose new generation is above floor as well as
// above the current one: a repair of a catalog restored from an older
// backup takes it past every generation the hosts have recorded.
func ChangeAbove(ctx context.Context, pool *pgxpool.Pool, want, floor int64, what string, fn func(tx pgx.Tx, gen int64) error) (int64, error) {
	next, _, err := changeIf(ctx, pool, want, floor, DefaultLockWait, func(tx pgx.Tx, gen int64) (string, error) {
		return what, fn(tx, gen)
	})
	if err != nil {
		return 0, fmt.Errorf("catalog change (%s): %w", what, err)
	}
	return next, nil
}

func changeIf(ctx context.Context, pool *pgxpool.Pool, want, floor int64, wait time.Duration, fn func(tx pgx.Tx, gen int64) (what string, err error)) (gen int64, changed bool, err error) {
	if wait <= 0 {
		wait = DefaultLockWait
	}
	var next int64
	start := time.Now()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := SetLockTimeout(ctx, tx, wait); err != nil {
			return err
		}
		var cur int64
		if err := tx.QueryRow(ctx, `SELECT generation FROM shardid.cluster FOR UPDATE`).Scan(&cur); err != nil {
			if errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err) {
				return shardmgr.ErrNotInitialized
			}
			return err
		}
		if want != 0 && cur != want {
			return &shardmgr.GenerationError{Want: want, Got: cur}
		}
		next = max(cur, floor) + 1
		what, err := fn(tx, next)
		if err != nil {
			return err
		}
		if what == "" {
			next = cur
			return nil
		}
		changed = true
		if _, err := tx.Exec(ctx, `UPDATE shardid.cluster SET generation = $1, updated_at = now()`, next); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO shardid.changes (generation, what) VALUES ($1, $2)`, next, what)
		return err
	})
	if pg.IsLockTimeout(err) {
		return 0, false, ClusterLockWait(ctx, pool, start)
	}
	if err != nil {
		return 0, false, err
	}
	return next, changed, nil
}

// SetLockTimeout bounds every lock wait of tx's statements by wait.
func SetLockTimeout(ctx context.Context, tx pgx.Tx, wait time.Duration) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, max(wait.Milliseconds(), 1)))
	return err
}

// ClusterLockWait is the error of a wait for the catalog's cluster row
// (or another lock of a catalog change) that began at start and ran out,
// naming the sessions that hold a write lock on the catalog's cluster
// table.
func ClusterLockWait(ctx context.Context, q pg.Querier, start time.Time) error {
	return pg.LockWaitFailed(ctx, "the catalog's cluster row ("+ClusterTable+"), which every catalog change locks", start,
		func(ctx context.Context) ([]pg.LockHolder, error) { return pg.TableLockHolders(ctx, q, ClusterTable) })
}

// LockToCreate takes, in tx, the lock under which a cluster is created in
// an empty catalog (the cluster table in EXCLUSIVE mode, which a catalog
// change's row lock waits for and only a role that may write the catalog
// can take), waiting DefaultLockWait at most (ClusterLockWait then names
// the holders, read through pool), and reads the map: an error wrapping
// shardmgr.ErrNotInitialized while the catalog still holds no cluster.
func LockToCreate(ctx context.Context, tx pgx.Tx, pool pg.Querier) (*shardmgr.ShardMap, error) {
	start := time.Now()
	if err := SetLockTimeout(ctx, tx, DefaultLockWait); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+ClusterTable+` IN EXCLUSIVE MODE`); err != nil {
		if pg.IsLockTimeout(err) {
			return nil, ClusterLockWait(ctx, pool, start)
		}
		return nil, err
	}
	return shardmgr.ReadMap(ctx, tx)
}

// SetShardState changes a shard's state in the catalog, guarded by the
// generation the caller last read (want; 0 skips the guard). It returns
// the new generation. Of two managers changing the catalog from the same
// generation, exactly one wins; the other gets a *GenerationError.
func SetShardState(ctx context.Context, catalog *pgxpool.Pool, shard int, state shardmgr.State, want int64) (int64, error) {
	if !state.Valid() {
		return 0, fmt.Errorf("shard %d: invalid state %q (active, read-only, moving)", shard, state)
	}
	return Change(ctx, catalog, want, fmt.Sprintf("shard %d -> %s", shard, state), func(tx pgx.Tx, gen int64) error {
		tag, err := tx.Exec(ctx, `UPDATE shardid.shards SET state = $2, changed_generation = $3 WHERE id = $1`, shard, string(state), gen)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &shardmgr.ShardError{Shard: shard, Err: shardmgr.ErrUnknownShard}
		}
		return nil
	})
}

// GeneratorParams is what the catalog expects shard id's generator to be.
func GeneratorParams(m *shardmgr.ShardMap, id int) shsql.Params {
	return shsql.Params{
		Shard: id, Schema: m.Shards[id].Schema, Variant: m.Variant, Epoch: m.Layout.Epoch,
		TimeBits: m.Layout.TimeBits, ShardBits: m.Layout.ShardBits, SeqBits: m.Layout.SeqBits,
	}
}

// Generation reads the catalog's current generation (an error wrapping
// shardmgr.ErrNotInitialized when it holds no cluster).
func Generation(ctx context.Context, q shardmgr.Querier) (int64, error) {
	m, err := shardmgr.ReadMap(ctx, q)
	if err != nil {
		return 0, err
	}
	return m.Generation, nil
}

// OpenMove is an unfinished move as the journal records it.
type OpenMove struct {
	ID       int64
	Shard    int
	From, To string
	Phase    Phase
	// Flipped: the move reached the point of no return (the catalog
	// places the shard on To); it cannot be undone, only finished.
	Flipped bool
}

// ReadOpenMoves reads the unfinished moves by shard; none when the
// catalog has no journal yet.
func ReadOpenMoves(ctx context.Context, q shardmgr.Querier) (map[int]OpenMove, error) {
	rows, err := q.Query(ctx, `SELECT id, shard, from_host, to_host, phase FROM shardid.moves WHERE `+OpenMoves)
	if err != nil {
		if pg.IsUndefinedTable(err) {
			return nil, nil
		}
		return nil, err
	}
	out := map[int]OpenMove{}
	var m OpenMove
	_, err = pgx.ForEachRow(rows, []any{&m.ID, &m.Shard, &m.From, &m.To, &m.Phase}, func() error {
		m.Flipped = m.Phase.PastNoReturn()
		out[m.Shard] = m
		return nil
	})
	if err != nil && pg.IsUndefinedTable(err) {
		return nil, nil
	}
	return out, err
}

// HostDiffKind is how a host of the cluster file differs from the catalog.
type HostDiffKind int

// The ways a cluster file's host can differ from the catalog's.
const (
	HostAdded   HostDiffKind = iota // in the file, not in the catalog
	HostDSN                         // the catalog records another DSN
	HostDrain                       // the catalog records another drain mark
	HostRemoved                     // in the catalog, not in the file
)

// HostDiff is one host on which the cluster file and the catalog differ.
type HostDiff struct {
	Name string
	Kind HostDiffKind
}

// CompareHosts compares the cluster file's hosts with the catalog's: the
// file's hosts in its order, then the hosts only the catalog has, in the
// catalog's order. It is the one comparison init, verify and the moves
// make.
func CompareHosts(m *shardmgr.ShardMap, cfg *shardmgr.Config) []HostDiff {
	var out []HostDiff
	for _, h := range cfg.Hosts {
		ch, ok := m.Host(h.Name)
		switch {
		case !ok:
			out = append(out, HostDiff{h.Name, HostAdded})
		case ch.DSN != h.CatalogDSN():
			out = append(out, HostDiff{h.Name, HostDSN})
		case ch.Drain != h.Drain:
			out = append(out, HostDiff{h.Name, HostDrain})
		}
	}
	for _, ch := range m.Hosts {
		if _, ok := cfg.Host(ch.Name); !ok {
			out = append(out, HostDiff{ch.Name, HostRemoved})
		}
	}
	return out
}

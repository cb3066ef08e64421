package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	shsql "github.com/shardid/shardid/sql"
)

// Defaults of the bounds every verify statement runs under.
const (
	// DefaultLockTimeout is Options.LockTimeout when zero.
	DefaultLockTimeout = 2 * time.Second
	// DefaultStatementTimeout is Options.StatementTimeout when zero.
	DefaultStatementTimeout = 30 * time.Second
	// lockConfirmDelay is how long an exclusive generator lock seen while
	// scanning a host must still be held by the same session before the
	// shard is reported blocked without being probed: the pull-up and
	// next_id_advance hold it for microseconds.
	lockConfirmDelay = 500 * time.Millisecond
)

// session is the kind of session verify's pools run as (the handle opens
// them): every statement under the lock timeout (advisory lock waits
// included) and statementTimeout (zero: none, for the deep scans), named
// "shardid verify" in pg_stat_activity unless the DSN names it. The
// connect timeout is the DSN's connect_timeout, else
// pg.DefaultConnectTimeout.
func (v *verifier) session(statementTimeout time.Duration) cluster.Session {
	return cluster.Session{LockTimeout: v.opts.LockTimeout, StatementTimeout: statementTimeout, Application: "shardid verify"}
}

// connectTimeout is the connect timeout the handle's pools use for dsn.
func connectTimeout(dsn string) time.Duration {
	if cfg, err := pgconn.ParseConfig(dsn); err == nil && cfg.ConnectTimeout > 0 {
		return cfg.ConnectTimeout
	}
	return pg.DefaultConnectTimeout
}

// lockHolder is a session holding a generator's advisory lock on a host
// (the lock's second key is the shard).
type lockHolder struct {
	pg.LockHolder
	shard int
}

// readLockHolders lists the sessions other than the caller's holding a
// generator's advisory lock (first key sql.LockClass, second the shard) in
// the database q is connected to; shard < 0 means every shard.
func readLockHolders(ctx context.Context, q shardmgr.Querier, shard int) ([]lockHolder, error) {
	hs, err := pg.AdvisoryHolders(ctx, q, int64(shsql.LockClass), int64(shard))
	if err != nil {
		return nil, err
	}
	out := make([]lockHolder, len(hs))
	for i, h := range hs {
		out[i] = lockHolder{LockHolder: h, shard: int(h.Key)}
	}
	return out, nil
}

// reportIdleSharedLocks reports shared generator locks held by idle
// sessions: a leak that stops the pull-ups (it never waits).
func (v *verifier) reportIdleSharedLocks(hs *hostScan) {
	for _, h := range hs.locks {
		if !h.Exclusive && strings.HasPrefix(h.State, "idle") {
			v.problem(CheckLock, h.shard, hs.name, "%s holds the generator's shared advisory lock: pull-ups of the counter stop; end that session (SELECT pg_terminate_backend(%d))", h, h.PID)
		}
	}
}

// confirmBlocked finds the shards of a host whose generator's exclusive
// lock is held by the same session as when the host was scanned, at least
// lockConfirmDelay later: their next_id() waits for that session, so they
// are reported with it and not probed (each probe would wait out the lock
// timeout). It returns those shards.
func (v *verifier) confirmBlocked(ctx context.Context, hs *hostScan) map[int]bool {
	seen := map[[2]int]bool{}
	for _, h := range hs.locks {
		if h.Exclusive {
			seen[[2]int{h.shard, int(h.PID)}] = true
		}
	}
	if len(seen) == 0 {
		return nil
	}
	select {
	case <-time.After(time.Until(hs.locksAt.Add(lockConfirmDelay))):
	case <-ctx.Done():
		return nil
	}
	now, err := readLockHolders(ctx, hs.pool, -1)
	if err != nil {
		v.problem(CheckLock, -1, hs.name, "%v", pg.OneLine(err))
		return nil
	}
	blocked := map[int]bool{}
	for _, h := range now {
		if h.Exclusive && seen[[2]int{h.shard, int(h.PID)}] && v.runsC(hs, h.shard) {
			v.note(CheckLock, h.shard, hs.name, "%s holds the generator's exclusive advisory lock: next_id() (the C generator) does not wait for it, next_id_advance and a move's clamp do; end that session (SELECT pg_terminate_backend(%d))", h, h.PID)
			continue
		}
		if h.Exclusive && seen[[2]int{h.shard, int(h.PID)}] {
			blocked[h.shard] = true
			v.problem(CheckLock, h.shard, hs.name, "next_id() is blocked: %s holds the generator's exclusive advisory lock, so every insert using the shard's DEFAULT waits for it; end that session (SELECT pg_terminate_backend(%d))", h, h.PID)
		}
	}
	return blocked
}

// waitedOut reports whether err is a statement cancelled by lock_timeout
// or statement_timeout.
func waitedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == pgerrcode.LockNotAvailable || pe.Code == pgerrcode.QueryCanceled)
}

// reportBlockedCall reports a generator call that waited out its lock or
// statement timeout, naming the sessions that hold the shard's generator
// lock now.
func (v *verifier) reportBlockedCall(ctx context.Context, t *shardTask, what string, err error) {
	detail := "no session holds the generator's advisory lock now"
	holders, herr := readLockHolders(ctx, t.host.pool, t.id)
	switch {
	case herr != nil:
		detail = "who holds the generator's advisory lock is unknown: " + pg.OneLine(herr)
	case len(holders) > 0:
		var parts []string
		for _, h := range holders {
			mode := "shared"
			if h.Exclusive {
				mode = "exclusive"
			}
			parts = append(parts, fmt.Sprintf("%s holds it (%s; end it with SELECT pg_terminate_backend(%d))", h, mode, h.PID))
		}
		detail = strings.Join(parts, "; ")
	}
	v.problem(CheckLock, t.id, t.host.name, "%s did not finish: %s; %s", what, pg.OneLine(err), detail)
}

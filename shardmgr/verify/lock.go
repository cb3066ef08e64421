package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/pg"
	shsql "github.com/shardid/shardid/sql"
)

// Defaults of the bounds every verify statement runs under.
const (
	defaultVerifyLockTimeout      = 2 * time.Second
	defaultVerifyStatementTimeout = 30 * time.Second
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

// lockHolder is a session holding a generator's advisory lock on a host.
type lockHolder struct {
	shard        int
	exclusive    bool
	pid          int32
	role, app    string
	state        string
	stateChange  *time.Time
	backendStart *time.Time
}

func (h lockHolder) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session pid %d (role %s, application %q", h.pid, orUnknown(h.role), h.app)
	if h.state != "" {
		fmt.Fprintf(&b, ", %s", h.state)
		if h.stateChange != nil {
			fmt.Fprintf(&b, " since %s", h.stateChange.UTC().Format(time.RFC3339))
		}
	}
	if h.backendStart != nil {
		fmt.Fprintf(&b, ", connected %s", h.backendStart.UTC().Format(time.RFC3339))
	}
	b.WriteString(")")
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// readLockHolders lists the sessions other than the caller's holding a
// generator's advisory lock in the database q is connected to; shard < 0
// means every shard. Advisory locks taken with two int4 keys appear in
// pg_locks as classid = key1 (sql.LockClass), objid = key2 (the shard),
// objsubid = 2.
func readLockHolders(ctx context.Context, q shardmgr.Querier, shard int) ([]lockHolder, error) {
	rows, err := q.Query(ctx, `SELECT l.objid::bigint, l.mode = 'ExclusiveLock', a.pid, coalesce(a.usename::text, ''),
		  coalesce(a.application_name, ''), coalesce(a.state, ''), a.state_change, a.backend_start
		FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::bigint::oid AND l.objsubid = 2
		  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		  AND a.pid <> pg_catalog.pg_backend_pid() AND ($2::int < 0 OR l.objid = $2::int::bigint::oid)
		ORDER BY 1, 3`, int64(shsql.LockClass), shard)
	if err != nil {
		return nil, fmt.Errorf("read advisory locks: %w", err)
	}
	var out []lockHolder
	var h lockHolder
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&id, &h.exclusive, &h.pid, &h.role, &h.app, &h.state, &h.stateChange, &h.backendStart}, func() error {
		h.shard = int(id)
		out = append(out, h)
		return nil
	})
	return out, err
}

// reportIdleSharedLocks reports shared generator locks held by idle
// sessions: a leak that stops the pull-ups (it never waits).
func (v *verifier) reportIdleSharedLocks(hs *hostScan) {
	for _, h := range hs.locks {
		if !h.exclusive && strings.HasPrefix(h.state, "idle") {
			v.problem(CheckLock, h.shard, hs.name, "%s holds the generator's shared advisory lock: pull-ups of the counter stop; end that session (SELECT pg_terminate_backend(%d))", h, h.pid)
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
		if h.exclusive {
			seen[[2]int{h.shard, int(h.pid)}] = true
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
		if h.exclusive && seen[[2]int{h.shard, int(h.pid)}] {
			blocked[h.shard] = true
			v.problem(CheckLock, h.shard, hs.name, "next_id() is blocked: %s holds the generator's exclusive advisory lock, so every insert using the shard's DEFAULT waits for it; end that session (SELECT pg_terminate_backend(%d))", h, h.pid)
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
			if h.exclusive {
				mode = "exclusive"
			}
			parts = append(parts, fmt.Sprintf("%s holds it (%s; end it with SELECT pg_terminate_backend(%d))", h, mode, h.pid))
		}
		detail = strings.Join(parts, "; ")
	}
	v.problem(CheckLock, t.id, t.host.name, "%s did not finish: %s; %s", what, pg.OneLine(err), detail)
}

package rebalance

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// startReplication copies the shard's rows at a snapshot and subscribes
// the target to the changes since (see copy_snapshot.go): a batch of one.
// When the move's batch already subscribed the target, there is nothing
// left to do; a batch that died before it subscribed is dropped and the
// move starts over.
func (mo *mover) startReplication(ctx context.Context, mv *move) error {
	repl, err := replNameOf(ctx, mv.src, mv.dst, mv.MoveRecord)
	if err != nil {
		return err
	}
	hasSub, err := subscriptionExists(ctx, mv.dst, repl)
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	if hasSub {
		if err := enableSubscription(ctx, mv.dst, repl); err != nil {
			return fmt.Errorf("target %s: %w", mv.To, err)
		}
		return setPhase(ctx, mo.catalog, mv.MoveRecord, PhaseCopy)
	}
	if repl != mv.replName {
		if err := dropBatch(ctx, mv.src, mv.dst, repl); err != nil {
			return fmt.Errorf("source %s: drop an unfinished batch: %w", mv.From, err)
		}
	}
	b := &batch{name: mv.replName, moves: []*move{mv}}
	if err := mo.copyBatch(ctx, b); err != nil {
		return err
	}
	if err := mo.subscribe(ctx, mv.dst, mv.To, []*batch{b}); err != nil {
		return err
	}
	return b.recordCopied(ctx, mo)
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
	if mo.opts.ConnInfoPassword == ConnInfoPasswordOmit {
		return libpqConnInfoWithout(h.DSN, "password")
	}
	return libpqConnInfo(h.DSN)
}

// ConnInfoPassword says whether the subscription's conninfo carries the
// source's password (MoveOptions.ConnInfoPassword).
type ConnInfoPassword string

const (
	// ConnInfoPasswordInclude (the zero value) writes the DSN's password
	// into the conninfo, as the target's server needs it unless it finds
	// one in a .pgpass file of its own.
	ConnInfoPasswordInclude ConnInfoPassword = ""
	// ConnInfoPasswordOmit leaves it out: the target's server connects
	// with its own .pgpass, a certificate or trust. Only for a
	// subscription owned by a superuser (ErrConnInfoPasswordNeeded).
	ConnInfoPasswordOmit ConnInfoPassword = "omit"
)

// checkConnInfoPassword refuses ConnInfoPasswordOmit on a target where
// the mover's role is no superuser: its subscription must carry a
// password (PostgreSQL 16 and later refuse a non-superuser's subscription
// whose conninfo has none: password_required; before 16 only a superuser
// subscribes at all).
func (mo *mover) checkConnInfoPassword(ctx context.Context, dst shardmgr.Querier, to string) error {
	if mo.opts.ConnInfoPassword != ConnInfoPasswordOmit || mo.opts.ConnInfo != nil {
		return nil
	}
	var super bool
	var role string
	if err := dst.QueryRow(ctx, `SELECT rolsuper, rolname FROM pg_catalog.pg_roles WHERE rolname = current_user`).Scan(&super, &role); err != nil {
		return fmt.Errorf("target %s: %w", to, err)
	}
	if !super {
		return fmt.Errorf("target %s: %w: the subscription's owner, role %s, is not a superuser (PostgreSQL 16 and later require a password in a non-superuser's subscription)",
			to, ErrConnInfoPasswordNeeded, role)
	}
	return nil
}

// tlsKeys are the libpq settings of a DSN that decide how the target's
// server checks the source's certificate and presents its own: a
// subscription carries them as written (a path names a file on the
// target's server).
var tlsKeys = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcrldir", "sslsni",
	"ssl_min_protocol_version", "ssl_max_protocol_version"}

// libpqConnInfo turns a DSN (URL or keywords, perhaps with pgx-only
// settings) into a libpq keyword string for CREATE SUBSCRIPTION: host,
// port, database, user, password, and the DSN's TLS settings as written
// (sslmode verify-full stays verify-full, with its sslrootcert); a DSN
// without sslmode gets the mode pgx settled on (disable, prefer, require).
func libpqConnInfo(dsn string) (string, error) { return libpqConnInfoWithout(dsn) }

// libpqConnInfoWithout is libpqConnInfo without the settings leave names.
func libpqConnInfoWithout(dsn string, leave ...string) (string, error) {
	// Neither error repeats the DSN: pgx masks a password only in some
	// spellings ("password = X" is quoted as written), and url.Parse's
	// error quotes the whole URL.
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", pgsession.RedactParseError(err)
	}
	written, err := dsnSettings(dsn)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("cannot parse the DSN: %w", err)
	}
	settings := [][2]string{{"host", pc.Host}, {"port", fmt.Sprint(pc.Port)}, {"dbname", pc.Database}, {"user", pc.User}}
	if pc.Password != "" {
		settings = append(settings, [2]string{"password", pc.Password})
	}
	if written["sslmode"] == "" {
		mode := "disable"
		if pc.TLSConfig != nil {
			mode = "require"
			for _, f := range pc.Fallbacks {
				if f.TLSConfig == nil {
					mode = "prefer"
				}
			}
		}
		settings = append(settings, [2]string{"sslmode", mode})
	}
	for _, k := range tlsKeys {
		if v := written[k]; v != "" {
			settings = append(settings, [2]string{k, v})
		}
	}
	var parts []string
	for _, kv := range settings {
		if slices.Contains(leave, kv[0]) {
			continue
		}
		if strings.ContainsRune(kv[1], 0) {
			return "", errors.New("cannot parse DSN: a NUL byte in a value")
		}
		parts = append(parts, kv[0]+"='"+strings.ReplaceAll(strings.ReplaceAll(kv[1], `\`, `\\`), `'`, `\'`)+"'")
	}
	return strings.Join(parts, " "), nil
}

// dsnSettings reads the settings a DSN spells out, by libpq keyword: a
// URL's query parameters, or a keyword/value string's pairs (values bare
// or single-quoted, with backslash escapes).
func dsnSettings(dsn string) (map[string]string, error) {
	out := map[string]string{}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, err
		}
		for k, v := range u.Query() {
			if len(v) > 0 {
				out[k] = v[len(v)-1]
			}
		}
		return out, nil
	}
	s := dsn
	for {
		s = strings.TrimLeft(s, " \t\n\r\f\v")
		if s == "" {
			return out, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, errors.New("a setting without =")
		}
		key := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\f\v")
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			closed := false
			for len(s) > 0 {
				c := s[0]
				s = s[1:]
				if c == '\\' && len(s) > 0 {
					val.WriteByte(s[0])
					s = s[1:]
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, errors.New("an unterminated quoted value")
			}
		} else {
			for len(s) > 0 && !strings.ContainsRune(" \t\n\r\f\v", rune(s[0])) {
				if s[0] == '\\' && len(s) > 1 {
					s = s[1:]
				}
				val.WriteByte(s[0])
				s = s[1:]
			}
		}
		out[key] = val.String()
	}
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
		if err != nil && errors.As(err, &pe) && (pe.Code == pgerrcode.ObjectInUse || pe.Code == pgerrcode.UndefinedObject) && i <= 50 { // in use, or just gone
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return err
	}
}

// dropReplication removes a move's replication: its tables leave its
// batch's publication, and the batch's subscription, slot and publication
// go with the batch's last move; then its mark tables and change logs. It
// is idempotent.
func dropReplication(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) error {
	repl, err := replNameOf(ctx, src, dst, rec)
	if err != nil {
		return err
	}
	// The batch's moves leave it one at a time (a lock on the source,
	// which they share), so that exactly the last one drops it. The
	// batch's name is its first move's: whether others share it, the
	// publication tells.
	unlock, err := lockBatch(ctx, src, repl)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	defer unlock()
	last, err := leaveBatch(ctx, src, rec, repl)
	if err != nil {
		return fmt.Errorf("source %s: %w", rec.From, err)
	}
	if last {
		if err := dropSubscription(ctx, dst, repl); err != nil {
			return fmt.Errorf("target %s: %w", rec.To, err)
		}
		if err := dropSlot(ctx, src, repl); err != nil {
			return fmt.Errorf("source %s: %w", rec.From, err)
		}
		if _, err := src.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pgx.Identifier{repl}.Sanitize()); err != nil {
			return fmt.Errorf("source %s: %w", rec.From, err)
		}
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
// confirmed, in bytes (-1 when the slot has confirmed nothing yet).
func replicationLag(ctx context.Context, src shardmgr.Querier, slot string) (int64, error) {
	lag, err := readSlotLag(ctx, src, slot)
	if err != nil {
		return 0, err
	}
	return lag.Bytes, nil
}

// readSlotLag reads slot's lag on the source in one query: the bytes of
// WAL written since what the slot's subscriber confirmed, and the
// walsender's replay_lag in seconds (null when the subscriber is not
// connected, has been idle, or the role may not read it).
func readSlotLag(ctx context.Context, src shardmgr.Querier, slot string) (*Lag, error) {
	var bytes *int64
	lag := &Lag{Slot: slot}
	err := src.QueryRow(ctx, `SELECT (pg_catalog.pg_current_wal_lsn() - s.confirmed_flush_lsn)::bigint,
			extract(epoch FROM r.replay_lag)::float8
		FROM pg_catalog.pg_replication_slots s LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_name = $1`, slot).Scan(&bytes, &lag.Seconds)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("replication slot %s is missing on the source", slot)
	}
	if err != nil {
		return nil, err
	}
	lag.Bytes = -1
	if bytes != nil {
		lag.Bytes = *bytes
	}
	return lag, nil
}

// catchUp waits for the initial copy of every table and for the lag to
// fall under CatchupDelay. It never waits unbounded: the target's server
// must start the subscription's apply worker within WorkerStartTimeout (at
// once when its worker slots are all taken), and the whole catch-up must
// end within CatchupTimeout.
func (mo *mover) catchUp(ctx context.Context, mv *move) error {
	src, dst := mv.src, mv.dst
	repl, err := replNameOf(ctx, src, dst, mv.MoveRecord)
	if err != nil {
		return err
	}
	if err := enableSubscription(ctx, dst, repl); err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	watch, err := watchApply(ctx, dst, repl)
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	worker := false
	for {
		var tables, ready int
		err := dst.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE r.srsubstate = 'r')
			FROM pg_catalog.pg_subscription s LEFT JOIN pg_catalog.pg_subscription_rel r ON r.srsubid = s.oid
			WHERE s.subname = $1 AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
			GROUP BY s.oid`, repl).Scan(&tables, &ready)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("target %s: subscription %s is missing", mv.To, repl)
		}
		if err != nil {
			return fmt.Errorf("target %s: %w", mv.To, err)
		}
		if err := watch.check(ctx, mv); err != nil {
			return err
		}
		if !worker {
			ws, err := readWorkerSlots(ctx, dst, repl)
			if err != nil {
				return fmt.Errorf("target %s: %w", mv.To, err)
			}
			worker = ws.running
			if err := ws.check(repl, time.Since(start), mo.opts.WorkerStartTimeout); err != nil {
				return fmt.Errorf("target %s: %w", mv.To, err)
			}
		}
		lag, err := replicationLag(ctx, src, repl)
		if err != nil {
			return fmt.Errorf("source %s: %w", mv.From, err)
		}
		// Rows on the target so far, from its statistics (they trail by
		// up to a second): progress only.
		var rows int64
		_ = dst.QueryRow(ctx, `SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_catalog.pg_stat_user_tables WHERE schemaname = $1`, mv.Schema).Scan(&rows)
		mo.progress(mv.MoveRecord, MoveProgress{Phase: PhaseCatchup, Tables: tables, Synced: ready, Rows: rows, Lag: lag})
		if worker && ready == tables {
			near, err := mo.closeEnough(ctx, src, dst, mv.MoveRecord)
			if err != nil {
				return err
			}
			if near {
				return setPhase(ctx, mo.catalog, mv.MoveRecord, PhaseCatchup)
			}
		}
		if waited := time.Since(start); waited > mo.opts.CatchupTimeout {
			return fmt.Errorf("%w: after %s (the catch-up timeout) the target is %d bytes of WAL behind, %d of %d tables synced", ErrCatchupTimeout, mo.opts.CatchupTimeout, lag, ready, tables)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// workerSlots is what the target's server says of a subscription's apply
// worker and of the limits on starting one.
type workerSlots struct {
	running bool // the subscription's apply worker runs
	// logical replication workers running, and max_logical_replication_workers
	used, max int
	// background workers running, and max_worker_processes
	bgUsed, bgMax int
}

// readWorkerSlots reads the target's subscription workers: those
// pg_stat_subscription lists and those pg_stat_activity shows (the larger
// count: one view may trail the other by a moment).
func readWorkerSlots(ctx context.Context, dst shardmgr.Querier, sub string) (workerSlots, error) {
	var w workerSlots
	err := dst.QueryRow(ctx, `SELECT
			EXISTS (SELECT FROM pg_catalog.pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL AND relid IS NULL),
			greatest((SELECT count(*) FROM pg_catalog.pg_stat_subscription WHERE pid IS NOT NULL),
				(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'logical replication worker')),
			pg_catalog.current_setting('max_logical_replication_workers')::int,
			(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type NOT IN ('client backend', 'autovacuum launcher',
				'autovacuum worker', 'background writer', 'checkpointer', 'archiver', 'startup', 'walreceiver', 'walsender', 'walwriter',
				'standalone backend')),
			pg_catalog.current_setting('max_worker_processes')::int`, sub).Scan(&w.running, &w.used, &w.max, &w.bgUsed, &w.bgMax)
	return w, err
}

// check fails when the subscription has no worker and cannot get one:
// every slot is taken (at once), or none started within timeout.
func (w workerSlots) check(sub string, waited, timeout time.Duration) error {
	switch {
	case w.running:
		return nil
	case w.used >= w.max:
		return fmt.Errorf("%w for subscription %s: all %d slots are taken (max_logical_replication_workers = %d); raise it "+
			"(ALTER SYSTEM SET max_logical_replication_workers = ..., then restart the server) or run fewer moves to this host at once",
			ErrNoWorker, sub, w.used, w.max)
	case w.bgUsed >= w.bgMax:
		return fmt.Errorf("%w for subscription %s: all %d background worker slots are taken (max_worker_processes = %d); raise it "+
			"(ALTER SYSTEM SET max_worker_processes = ..., then restart the server) or run fewer moves to this host at once",
			ErrNoWorker, sub, w.bgUsed, w.bgMax)
	case waited > timeout:
		return fmt.Errorf("%w for subscription %s: none started within %s (%d of max_logical_replication_workers = %d in use, "+
			"%d of max_worker_processes = %d); the target server's log says why", ErrNoWorker, sub, timeout, w.used, w.max, w.bgUsed, w.bgMax)
	}
	return nil
}

// enableSubscription enables the subscription name on the target when it
// exists and a failed run disabled it.
func enableSubscription(ctx context.Context, dst pg.Execer, name string) error {
	var disabled bool
	err := dst.QueryRow(ctx, `SELECT NOT subenabled FROM pg_catalog.pg_subscription
		WHERE subname = $1 AND subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())`, name).Scan(&disabled)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !disabled) {
		return nil
	}
	if err == nil {
		_, err = dst.Exec(ctx, `ALTER SUBSCRIPTION `+pgx.Identifier{name}.Sanitize()+` ENABLE`)
	}
	if err != nil {
		return fmt.Errorf("enable subscription %s: %w", name, err)
	}
	return nil
}

// stopSubscriptions disables the subscriptions of online moves that
// stopped unfinished, so that they hold none of their targets' worker
// slots (the slots on the sources keep the changes for a resume, which
// enables them again). Best effort: a failure is logged.
func (mo *mover) stopSubscriptions(ctx context.Context, recs []*MoveRecord) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, rec := range recs {
		if rec.Mode != MoveOnline || !rec.Phase.Open() {
			continue
		}
		dst, err := mo.pool(ctx, rec.To)
		var repl string
		if err == nil {
			repl, err = replNameOf(ctx, nil, dst, rec)
		}
		if err == nil {
			err = disableSubscription(ctx, dst, repl)
		}
		if err != nil {
			mo.log.Warn("could not disable a stopped move's subscription: it may hold a worker slot on the target until the move is resumed or aborted",
				"id", rec.ID, "host", rec.To, "err", err)
		}
	}
}

// disableSubscription disables the subscription name on the target when
// it exists.
func disableSubscription(ctx context.Context, dst pg.Execer, name string) error {
	ok, err := subscriptionExists(ctx, dst, name)
	if err == nil && ok {
		_, err = dst.Exec(ctx, `ALTER SUBSCRIPTION `+pgx.Identifier{name}.Sanitize()+` DISABLE`)
	}
	if err != nil {
		return fmt.Errorf("disable subscription %s: %w", name, err)
	}
	return nil
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

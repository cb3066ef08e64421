package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/base/ternsplit"
)

// failedShard is the result of a shard that stopped at version with err.
func failedShard(sh shardmgr.Shard, host string, version int, mig *RenderedMigration, dir Direction, err error) ShardMigration {
	me := &MigrationError{Shard: sh.ID, Host: host, Version: version, Err: err, Message: err.Error()}
	if mig != nil {
		me.Migration, me.Direction = mig.Name, dir
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		me.SQLState = pe.Code
		me.Message = pgMessage(pe)
	}
	var step *noTxStepError
	if errors.As(err, &step) {
		me.Partial = true
		me.Message = fmt.Sprintf("statement %d of %d: %s", step.index+1, step.of, me.Message)
	}
	return ShardMigration{ID: sh.ID, Host: host, From: version, To: version, Err: me}
}

// pgMessage is a PostgreSQL error on one line: severity, message, and
// where it points in the SQL.
func pgMessage(pe *pgconn.PgError) string {
	msg := pe.Severity + ": " + pe.Message
	if pe.Detail != "" {
		msg += " (" + pe.Detail + ")"
	}
	if pe.Position > 0 {
		msg += fmt.Sprintf(" at character %d", pe.Position)
	}
	return msg
}

// noTxStepError is a statement of a disable-tx migration that failed after
// the statements before it committed.
type noTxStepError struct {
	index, of int
	err       error
}

func (e *noTxStepError) Error() string { return e.err.Error() }

func (e *noTxStepError) Unwrap() error { return e.err }

// shardRun is one shard's run, what migrateShard needs.
type shardRun struct {
	conn  *pgx.Conn // a session on the database that holds the shard
	host  string    // the host named in the result and in lock waits
	shard shardmgr.Shard
	migs  []RenderedMigration // the set rendered for this shard
	// target is the version to reach, in direction dir.
	target int
	dir    Direction
	// lockTimeout is each step's lock_timeout (Options.LockTimeout; zero:
	// none); lockWait bounds the wait for the shard's migration lock
	// (Options.LockWait; zero: DefaultShardLockWait), and waiting is
	// called when another session holds it.
	lockTimeout, lockWait time.Duration
	waiting               func(LockWait)
	// stop, once set, ends the run before the shard's next step.
	stop *atomic.Bool
	// incoming: the shard is a move's incoming copy (see applyStep).
	incoming bool
}

// step is one migration half as applyStep runs it.
type step struct {
	schema    string // the shard's schema
	cur, next int    // the shard's version before and after the step
	name      string // the migration's file name, for the failure table
	dir       Direction
	sql       string // the half's rendered SQL
	noTx      bool   // a disable-tx half: statement by statement
	// lockTimeout is the step's lock_timeout (zero: none).
	lockTimeout time.Duration
	incoming    bool // the shard is a move's incoming copy
}

// migrateShard moves one shard to r.target under its lock. A failure is in
// the result's Err, and recorded in the shard's FailureTable.
func migrateShard(ctx context.Context, r shardRun) ShardMigration {
	sh := r.shard
	unlock, err := lockShard(ctx, r.conn, r.host, sh.ID, r.lockWait, r.waiting)
	if err != nil {
		return failedShard(sh, r.host, -1, nil, "", fmt.Errorf("lock: %w", err))
	}
	defer unlock()
	cur, err := prepareShard(ctx, r.conn, sh.Schema)
	if err != nil {
		return failedShard(sh, r.host, -1, nil, "", err)
	}
	res := ShardMigration{ID: sh.ID, Host: r.host, From: cur, To: cur}
	if cur > len(r.migs) {
		return failedShard(sh, r.host, cur, nil, "", fmt.Errorf("%w: the shard is at version %d but the set has %d migrations", ErrUnknownVersion, cur, len(r.migs)))
	}
	for (r.dir == Up && cur < r.target) || (r.dir == Down && cur > r.target) {
		if r.stop.Load() {
			res.Stopped = true
			return res
		}
		var (
			mig  *RenderedMigration
			sql  string
			noTx bool
			next int
		)
		if r.dir == Up {
			mig, next = &r.migs[cur], cur+1
			sql, noTx = mig.Up, mig.UpNoTx
		} else {
			mig, next = &r.migs[cur-1], cur-1
			sql, noTx = mig.Down, mig.DownNoTx
			if sql == "" {
				f := failedShard(sh, r.host, cur, mig, r.dir, ErrIrreversible)
				f.From = res.From
				return f
			}
		}
		err := applyStep(ctx, r.conn, step{
			schema: sh.Schema, cur: cur, next: next, name: mig.Name, dir: r.dir, sql: sql, noTx: noTx,
			lockTimeout: r.lockTimeout, incoming: r.incoming,
		})
		if err != nil {
			f := failedShard(sh, r.host, cur, mig, r.dir, err)
			f.From, f.Applied = res.From, res.Applied
			if ctx.Err() == nil {
				recordFailure(ctx, r.conn, sh.Schema, f.Err)
			}
			return f
		}
		cur = next
		res.To = cur
		res.Applied++
	}
	return res
}

// lockShard takes the shard's migration lock on conn: first without
// waiting, then, when another session holds it, saying so and waiting at
// most wait (zero: DefaultShardLockWait). Any role that may connect to the
// host's database can hold an advisory lock: a wait that runs out is a
// *pg.LockWaitError naming the holders. The returned function releases it.
func lockShard(ctx context.Context, conn *pgx.Conn, host string, shard int, wait time.Duration, waiting func(LockWait)) (func(), error) {
	if wait <= 0 {
		wait = DefaultShardLockWait
	}
	start := time.Now()
	holders := func(ctx context.Context) ([]pg.LockHolder, error) {
		return pg.AdvisoryHolders(ctx, conn, int64(migrateLockClass), int64(shard))
	}
	// Try without waiting; when the lock is taken, read who holds it. The
	// holder may let go in between: then try again, so that a wait is only
	// reported with the session it waits for.
	var ok bool
	var pid int
	for {
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, migrateLockClass, int32(shard)).Scan(&ok); err != nil {
			return nil, err
		}
		if ok {
			break
		}
		hs, err := holders(ctx)
		if err != nil || len(hs) > 0 || time.Since(start) > wait {
			if err == nil && len(hs) > 0 {
				pid = int(hs[0].PID)
			}
			break
		}
	}
	if !ok {
		waiting(LockWait{Shard: shard, Host: host, HolderPID: pid})
		if _, err := conn.Exec(ctx, fmt.Sprintf(`SET lock_timeout = %d`, wait.Milliseconds())); err != nil {
			return nil, err
		}
		_, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, migrateLockClass, int32(shard))
		if pg.IsLockTimeout(err) {
			return nil, pg.LockWaitFailed(ctx, fmt.Sprintf("shard %d's migration lock on %s (another run of migrate?)", shard, host), start, holders)
		}
		if err == nil {
			_, err = conn.Exec(ctx, `RESET lock_timeout`)
		}
		if err != nil {
			return nil, err
		}
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1, $2)`, migrateLockClass, int32(shard)); err != nil {
			// A session lock must not outlive the run: closing the
			// connection releases it.
			conn.Close(uctx)
		}
	}, nil
}

// prepareShard checks that the shard's schema exists, creates its version
// and failure tables when missing and returns its version.
func prepareShard(ctx context.Context, conn *pgx.Conn, schema string) (int, error) {
	vt, ft := pgx.Identifier{schema, VersionTable}.Sanitize(), pgx.Identifier{schema, FailureTable}.Sanitize()
	var hasSchema, hasVT, hasFT bool
	if err := conn.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL, to_regclass($2) IS NOT NULL, to_regclass($3) IS NOT NULL`,
		pgx.Identifier{schema}.Sanitize(), vt, ft).Scan(&hasSchema, &hasVT, &hasFT); err != nil {
		return 0, err
	}
	if !hasSchema {
		return 0, fmt.Errorf("%w: no schema %s", ErrShardSchemaMissing, schema)
	}
	// Before anything runs or is written: a trigger another role put on
	// the version tables (TRIGGER comes with GRANT ALL ON ALL TABLES)
	// would run as the migrating role at this step's version write.
	if err := shardschema.CheckTrusted(ctx, conn, schema); err != nil {
		return 0, err
	}
	if !hasVT {
		// tern's own statements, so that tern and shardid share the table.
		if _, err := conn.Exec(ctx, fmt.Sprintf(`create table if not exists %s(version int4 not null);
			insert into %s(version) select 0 where 0=(select count(*) from %s);`, vt, vt, vt)); err != nil {
			return 0, fmt.Errorf("create %s: %w", vt, err)
		}
	}
	if !hasFT {
		if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
			id        boolean     PRIMARY KEY DEFAULT true CHECK (id),
			version   int4        NOT NULL,
			migration text        NOT NULL,
			direction text        NOT NULL,
			state     text        NOT NULL CHECK (state IN ('failed', 'running')),
			partial   boolean     NOT NULL,
			sqlstate  text        NOT NULL,
			message   text        NOT NULL,
			at        timestamptz NOT NULL DEFAULT now())`, ft)); err != nil {
			return 0, fmt.Errorf("create %s: %w", ft, err)
		}
	}
	rows, err := conn.Query(ctx, `SELECT version FROM `+vt)
	if err != nil {
		return 0, err
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, err
	}
	if len(versions) != 1 {
		return 0, fmt.Errorf("%s has %d rows, want one", vt, len(versions))
	}
	return int(versions[0]), nil
}

// applyStep runs one migration's half on the shard at version st.cur and
// sets the version to st.next in the same transaction. A disable-tx half runs
// statement by statement; a row in the failure table says so while it runs
// and stays if it is interrupted.
//
// On a move's incoming copy (st.incoming) every step writes past the fence and
// fences the tables it made before it commits.
func applyStep(ctx context.Context, conn *pgx.Conn, st step) error {
	vt, ft := pgx.Identifier{st.schema, VersionTable}.Sanitize(), pgx.Identifier{st.schema, FailureTable}.Sanitize()
	setTimeout := ""
	if st.lockTimeout > 0 {
		setTimeout = fmt.Sprintf("SET LOCAL lock_timeout = %d", max(st.lockTimeout.Milliseconds(), 1))
	}
	if st.noTx {
		if _, err := conn.Exec(ctx, `INSERT INTO `+ft+` (version, migration, direction, state, partial, sqlstate, message)
			VALUES ($1, $2, $3, 'running', true, '', 'running without a transaction; if no run holds the shard, it was interrupted')
			ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, migration = EXCLUDED.migration, direction = EXCLUDED.direction,
			  state = EXCLUDED.state, partial = EXCLUDED.partial, sqlstate = EXCLUDED.sqlstate, message = EXCLUDED.message, at = now()`,
			st.cur, st.name, string(st.dir)); err != nil {
			return err
		}
		if setTimeout != "" {
			// Session-wide here (each statement commits on its own);
			// RESET ALL below or the deferred RESET puts it back.
			if _, err := conn.Exec(ctx, strings.Replace(setTimeout, "SET LOCAL", "SET", 1)); err != nil {
				return err
			}
			defer conn.Exec(context.WithoutCancel(ctx), `RESET lock_timeout`)
		}
		stmts := ternsplit.Split(st.sql)
		for i, s := range stmts {
			var err error
			if st.incoming {
				err = incomingStatement(ctx, conn, st.schema, s)
			} else {
				_, err = conn.Exec(ctx, s)
			}
			if err != nil {
				return &noTxStepError{index: i, of: len(stmts), err: err}
			}
		}
	}
	// A migration may SET search_path or other settings; the version
	// update must not depend on them (tern resets them too), nor the
	// pooled session's next user (the session's own timeouts stay:
	// pg.ResetAll). The finishing statements travel with COMMIT in
	// one round trip.
	finish := fmt.Sprintf(`%s; UPDATE %s SET version = %d; DELETE FROM %s`, pg.ResetAll(conn.PgConn(), &conn.Config().Config), vt, st.next, ft)
	if st.noTx {
		// One simple query is one implicit transaction: atomic.
		_, err := conn.Exec(ctx, finish)
		return err
	}
	begin := `BEGIN`
	if setTimeout != "" {
		begin += "; " + setTimeout
	}
	if st.incoming {
		begin += "; " + fence.PassSQL
	}
	if _, err := conn.Exec(ctx, begin); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, st.sql); err != nil {
		rollback(ctx, conn)
		return err
	}
	if st.incoming {
		if err := fence.NewTables(ctx, conn, st.schema); err != nil {
			rollback(ctx, conn)
			return err
		}
	}
	if _, err := conn.Exec(ctx, finish+`; COMMIT`); err != nil {
		rollback(ctx, conn)
		return err
	}
	return nil
}

// incomingStatement runs one statement of a disable-tx migration on a
// move's incoming copy: in a transaction of its own that fences the tables
// it made before it commits, unless PostgreSQL refuses the statement in a
// transaction block (CREATE INDEX CONCURRENTLY, VACUUM), which makes no
// table; that one runs alone.
func incomingStatement(ctx context.Context, conn *pgx.Conn, schema, stmt string) error {
	if _, err := conn.Exec(ctx, "BEGIN; "+fence.PassSQL); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, stmt)
	if err == nil {
		err = fence.NewTables(ctx, conn, schema)
	}
	if err == nil {
		_, err = conn.Exec(ctx, "COMMIT")
		return err
	}
	rollback(ctx, conn)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.ActiveSQLTransaction {
		return err
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return err
	}
	return fence.NewTables(ctx, conn, schema)
}

// rollback ends a failed transaction on conn, or closes conn when it
// cannot, so that the connection never carries a transaction on.
func rollback(ctx context.Context, conn *pgx.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := conn.Exec(rctx, `ROLLBACK`); err != nil {
		conn.Close(rctx)
	}
}

// recordFailure writes a shard's failure where MigrationStatus reads it.
// It is best effort: the run reports the failure anyway.
func recordFailure(ctx context.Context, conn *pgx.Conn, schema string, e *MigrationError) {
	if conn.IsClosed() {
		return
	}
	ft := pgx.Identifier{schema, FailureTable}.Sanitize()
	_, _ = conn.Exec(ctx, `INSERT INTO `+ft+` (version, migration, direction, state, partial, sqlstate, message)
		VALUES ($1, $2, $3, 'failed', $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, migration = EXCLUDED.migration, direction = EXCLUDED.direction,
		  state = EXCLUDED.state, partial = EXCLUDED.partial, sqlstate = EXCLUDED.sqlstate, message = EXCLUDED.message, at = now()`,
		e.Version, e.Migration, string(e.Direction), e.Partial, e.SQLState, e.Message)
}

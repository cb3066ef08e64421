package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// A fence makes a copy of a shard refuse writes on its own host, so that an
// application with a stale map (or none) cannot write to a copy that is
// moving or has moved. It has two parts, both inside the shard's schema:
//
//   - a statement trigger shardid_fence on every table (partitions too:
//     a parent's statement trigger does not fire for a write made
//     straight into one of its partitions), BEFORE INSERT,
//     UPDATE, DELETE and TRUNCATE, raising SQLSTATE SQLState. The
//     router turns that error into ErrShardMoving, so writers see the same
//     typed refusal whether their map is current or not. Logical
//     replication's apply workers run with session_replication_role =
//     replica and do not fire it, so a fenced target still receives the
//     source's changes. The mover's own writes (its COPY, a migration
//     step on an incoming copy) pass in a transaction that holds a pass
//     (Pass): a temporary table of that transaction owned by the fence
//     function's owner, which no other role can make.
//   - on a source, the counter's MAXVALUE lowered to its last value, so
//     next_id() itself fails there: no id can leave the old copy after its
//     counter was carried to the new one.
//
// The fence function is SECURITY DEFINER, owned by the role that runs
// moves (the toolkit's role), with a pinned search_path and no EXECUTE for
// PUBLIC (a trigger fires without it). Func refuses to replace a function
// of that name that another role owns (ErrForeignOwner).
//
// A retired copy (renamed shard_NNNN_moved_gG after the flip) keeps its
// fence; its generator also stops working because its functions name the
// old schema. The fence keeps every role out but the toolkit's own, its
// members and superusers, who can drop it anyway.
const (
	// SQLState is the SQLSTATE a fenced shard's tables raise on a
	// write.
	SQLState = "SIDFN"
	// fenceTrigger names the fence's trigger and trigger function.
	fenceTrigger = "shardid_fence"
	// Name is the name of the fence's trigger and trigger function.
	Name = fenceTrigger
	// passTable is the temporary table whose presence in the writer's
	// own temporary schema, owned by the fence's owner, lets a write
	// through (Pass).
	passTable = "shardid_fence_pass"
)

// PassSQL is the statement that gives the transaction it runs in a pass
// through the fences of the role that runs it (see Pass); it ends with
// the transaction. For callers that send it with other statements in one
// simple query.
const PassSQL = `CREATE TEMPORARY TABLE IF NOT EXISTS ` + passTable + ` () ON COMMIT DROP`

// ErrForeignOwner is an object the toolkit relies on inside a shard
// schema that a role other than the one running the toolkit owns: that
// role could make it do anything.
var ErrForeignOwner = errors.New("owned by another role")

// Pass lets the transaction tx write to the fenced copies whose fence the
// role running tx owns: only that role (its members, superusers) can make
// a table it owns, and a temporary one is seen by its own session only and
// dropped when tx ends. A setting would not do: every role can set any
// placeholder setting, per session, role or connection string.
func Pass(ctx context.Context, tx pg.Execer) error {
	if _, err := tx.Exec(ctx, PassSQL); err != nil {
		return fmt.Errorf("pass the fence: %w", err)
	}
	return nil
}

// RetiredSchema is the name the old copy of a shard is kept under after a
// move flipped the map at generation gen: shard_0005_moved_g12.
func RetiredSchema(schema string, gen int64) string { return fmt.Sprintf("%s_moved_g%d", schema, gen) }

// IsFenceError reports whether err is a fenced shard refusing a write.
func IsFenceError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == SQLState
}

// ShardTables lists the names of the tables in schema: ordinary,
// partitioned, and the partitions of every level, each parent
// before its partitions (so that DDL taking their locks one by one takes
// them in the order a write through the parent does), then in name order.
// A partition takes writes of its own (an INSERT straight into it), which
// a statement trigger on its parent never sees: each table needs the
// fence.
func ShardTables(ctx context.Context, q pg.Querier, schema string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
		ORDER BY (SELECT count(*) FROM pg_catalog.pg_partition_ancestors(c.oid)), c.relname COLLATE "C"`, schema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Func writes schema's fence function: raising, or open (it lets
// every write through). Swapping the body takes no lock on the tables, so
// it cannot queue behind autovacuum or make writers queue behind it, and a
// writer that takes its table lock after the swap committed runs the new
// body. Raise below waits for the writers that took theirs before. It
// refuses (ErrForeignOwner) when a function of that name exists that
// another role owns.
func Func(ctx context.Context, tx pg.Execer, schema string, raise bool) error {
	fn := pgx.Identifier{schema, fenceTrigger}.Sanitize()
	if err := CheckOwner(ctx, tx, fn+"()"); err != nil {
		if !raise && errors.Is(err, ErrForeignOwner) {
			// Opening a fence that no trigger uses (another role's function,
			// which refused the fence's installation) has nothing to open:
			// an abort must get through.
			var used bool
			if qerr := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_trigger WHERE tgfoid = pg_catalog.to_regprocedure($1))`, fn+"()").Scan(&used); qerr != nil {
				return fmt.Errorf("fence %s: %w", schema, qerr)
			}
			if !used {
				return nil
			}
		}
		return fmt.Errorf("fence %s: %w", schema, err)
	}
	body := `RETURN NULL;`
	if raise {
		// Inside a SECURITY DEFINER function current_user is its owner.
		body = fmt.Sprintf(`IF EXISTS (SELECT FROM pg_catalog.pg_class c
      WHERE c.relnamespace = pg_catalog.pg_my_temp_schema() AND c.relname = '%s'
      AND c.relowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER)) THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION USING ERRCODE = '%s',
    MESSAGE = pg_catalog.format('shard schema %%s is fenced: the shard is moving or has moved to another host', TG_TABLE_SCHEMA),
    HINT = 'write through the shard map (shardid router); it names the shard''s current host';`, passTable, SQLState)
	}
	_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $shardid$
BEGIN
  %s
END
$shardid$;
REVOKE ALL ON FUNCTION %s() FROM PUBLIC`, fn, body, fn))
	if err != nil {
		return fmt.Errorf("fence %s: %w", schema, err)
	}
	return nil
}

// CheckOwner refuses (ErrForeignOwner, naming the owner) when the function
// fn (a regprocedure, quoted: schema.name(args)) exists and a role other
// than the current one owns it: replacing it would keep that owner, who
// could then put any body back.
func CheckOwner(ctx context.Context, q pg.Querier, fn string) error {
	var name, owner string
	var mine bool
	err := q.QueryRow(ctx, `SELECT p.oid::pg_catalog.regprocedure::text, r.rolname, r.rolname = CURRENT_USER FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_roles r ON r.oid = p.proowner WHERE p.oid = pg_catalog.to_regprocedure($1)`, fn).Scan(&name, &owner, &mine)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("owner of %s: %w", fn, err)
	}
	if !mine {
		return fmt.Errorf("function %s is %w %s, not the role running the toolkit; drop it (or make the toolkit's role its owner) and run again", name, ErrForeignOwner, owner)
	}
	return nil
}

// Install creates the fence's trigger function in schema, raising or
// open, and its trigger on every table of schema. It is idempotent. The
// triggers take a lock on each table that waits for writers in flight
// (and for autovacuum).
func Install(ctx context.Context, tx pg.Execer, schema string, raise bool) error {
	// Func lets an open fence over another role's function pass, for an
	// abort; triggers must never be put on one.
	if err := CheckOwner(ctx, tx, pgx.Identifier{schema, fenceTrigger}.Sanitize()+"()"); err != nil {
		return fmt.Errorf("fence %s: %w", schema, err)
	}
	if err := Func(ctx, tx, schema, raise); err != nil {
		return err
	}
	tables, err := ShardTables(ctx, tx, schema)
	if err != nil {
		return fmt.Errorf("fence %s: %w", schema, err)
	}
	return OnTables(ctx, tx, schema, tables)
}

// OnTables puts the fence's trigger on tables of schema; the fence
// function must exist.
func OnTables(ctx context.Context, tx pg.Execer, schema string, tables []string) error {
	fn := pgx.Identifier{schema, fenceTrigger}.Sanitize()
	for _, t := range tables {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE OR REPLACE TRIGGER %s BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s
			FOR EACH STATEMENT EXECUTE FUNCTION %s()`, pgx.Identifier{fenceTrigger}.Sanitize(), pgx.Identifier{schema, t}.Sanitize(), fn)); err != nil {
			return fmt.Errorf("fence %s.%s: %w", schema, t, err)
		}
	}
	return nil
}

// NewTables puts the fence's trigger on the tables of a move's
// incoming copy that lack it, all but the migration bookkeeping (which the
// migration run itself writes to). A migration that builds the copy calls
// it before each commit, so that no table of the copy is ever visible
// without its fence.
func NewTables(ctx context.Context, tx pg.Execer, schema string) error {
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname <> ALL ($2)
		AND NOT EXISTS (SELECT FROM pg_catalog.pg_trigger tg WHERE tg.tgrelid = c.oid AND tg.tgname = $3)
		ORDER BY (SELECT count(*) FROM pg_catalog.pg_partition_ancestors(c.oid)), c.relname COLLATE "C"`, schema, []string{shardschema.VersionTable, shardschema.FailureTable}, fenceTrigger)
	if err != nil {
		return fmt.Errorf("fence %s: %w", schema, err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("fence %s: %w", schema, err)
	}
	return OnTables(ctx, tx, schema, tables)
}

// Installed reports whether every table of schema carries the fence
// trigger.
func Installed(ctx context.Context, q pg.Querier, schema string) (bool, error) {
	var missing int
	err := q.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
		AND NOT EXISTS (SELECT FROM pg_catalog.pg_trigger tg WHERE tg.tgrelid = c.oid AND tg.tgname = $2 AND tg.tgenabled <> 'D')`,
		schema, fenceTrigger).Scan(&missing)
	return missing == 0, err
}

// Raise fences schema on db without waiting on a table lock: its
// (open) fence function becomes the raising one, then it waits until every
// transaction that held a write lock on one of schema's tables at that
// moment has ended, so that none lands after the fence. Tables without the
// trigger get it the locking way.
func Raise(ctx context.Context, db *pgxpool.Pool, schema string, lockTimeout time.Duration) error {
	var writers []string
	err := pg.WithLockRetry(ctx, db, lockTimeout, 30, func(tx pgx.Tx) error {
		ok, err := Installed(ctx, tx, schema)
		if err != nil {
			return err
		}
		if !ok {
			return Install(ctx, tx, schema, true)
		}
		return Func(ctx, tx, schema, true)
	})
	if err != nil {
		return err
	}
	// Read after the commit: a writer that locks a table from now on runs
	// the raising body.
	rows, err := db.Query(ctx, `SELECT DISTINCT l.virtualtransaction FROM pg_catalog.pg_locks l
		JOIN pg_catalog.pg_class c ON c.oid = l.relation
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND l.mode = 'RowExclusiveLock' AND l.granted AND l.pid <> pg_catalog.pg_backend_pid()`, schema)
	if err == nil {
		writers, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return err
	}
	// As long as taking the locks the fence once took could have lasted.
	deadline := time.Now().Add(30 * lockTimeout)
	for len(writers) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("fence %s: transactions that were writing when the fence went up are still open after %v", schema, 30*lockTimeout)
		}
		var left int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'virtualxid' AND virtualxid = ANY($1) AND granted`, writers).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// Remove drops the fence's triggers and function from schema in one
// transaction. It is idempotent. It holds every table's ACCESS EXCLUSIVE
// lock until tx ends, a parent's before its partitions': against writers
// that write straight into a partition (which lock the partition, then
// its parents) that order deadlocks. RemoveOpen does not.
func Remove(ctx context.Context, tx pg.Execer, schema string) error {
	tables, err := ShardTables(ctx, tx, schema)
	if err != nil {
		return fmt.Errorf("unfence %s: %w", schema, err)
	}
	for _, t := range tables {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`DROP TRIGGER IF EXISTS %s ON %s`,
			pgx.Identifier{fenceTrigger}.Sanitize(), pgx.Identifier{schema, t}.Sanitize())); err != nil {
			return fmt.Errorf("unfence %s.%s: %w", schema, t, err)
		}
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`DROP FUNCTION IF EXISTS %s()`, pgx.Identifier{schema, fenceTrigger}.Sanitize())); err != nil {
		return fmt.Errorf("unfence %s: %w", schema, err)
	}
	return nil
}

// RemoveOpen drops an open fence (Func with raise false) from schema: the
// trigger of each table in a transaction of its own, each waiting at most
// lockTimeout for its lock (and retried), then the function. Holding one
// table's lock at a time, it cannot deadlock with writers, whatever order
// they lock a partition tree in; and while some triggers are left, they
// let every write through. It is idempotent.
func RemoveOpen(ctx context.Context, db interface {
	pg.TxBeginner
	pg.Execer
}, schema string, lockTimeout time.Duration) error {
	tables, err := ShardTables(ctx, db, schema)
	if err != nil {
		return fmt.Errorf("unfence %s: %w", schema, err)
	}
	for _, t := range tables {
		err := pg.WithLockRetry(ctx, db, lockTimeout, 30, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, fmt.Sprintf(`DROP TRIGGER IF EXISTS %s ON %s`,
				pgx.Identifier{fenceTrigger}.Sanitize(), pgx.Identifier{schema, t}.Sanitize()))
			return err
		})
		if err != nil {
			return fmt.Errorf("unfence %s.%s: %w", schema, t, err)
		}
	}
	if _, err := db.Exec(ctx, fmt.Sprintf(`DROP FUNCTION IF EXISTS %s()`, pgx.Identifier{schema, fenceTrigger}.Sanitize())); err != nil {
		return fmt.Errorf("unfence %s: %w", schema, err)
	}
	return nil
}

// ClampCounter stops shard's counter in schema where it stands: under the
// generator's exclusive lock and the sequence's own ALTER SEQUENCE lock
// (which the C generator's nextval respects too) it draws one value and
// lowers MAXVALUE to it, so every later nextval fails. It returns that
// last value.
func ClampCounter(ctx context.Context, tx pg.Execer, schema string, shard int) (int64, error) {
	seq := pgx.Identifier{schema, shsql.CounterName}.Sanitize()
	if _, err := tx.Exec(ctx, `SELECT pg_catalog.pg_advisory_xact_lock($1, $2)`, int64(shsql.LockClass), int64(shard)); err != nil {
		return 0, err
	}
	var last, maxv int64
	var called bool
	if err := tx.QueryRow(ctx, `SELECT last_value, is_called, (SELECT seqmax FROM pg_catalog.pg_sequence WHERE seqrelid = $1::regclass) FROM `+seq, seq).
		Scan(&last, &called, &maxv); err != nil {
		return 0, err
	}
	if called && last == maxv {
		return last, nil // already clamped
	}
	// The C generator draws without the advisory lock: ALTER SEQUENCE's
	// lock, held to the end of tx, is what stops every nextval (C or not)
	// between the draw below and the new MAXVALUE. Without it a draw in
	// between makes the clamp fail (RESTART value greater than MAXVALUE).
	if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER SEQUENCE %s MAXVALUE %d`, seq, maxv)); err != nil {
		return 0, err
	}
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.nextval($1::regclass)`, seq).Scan(&last); err != nil {
		return 0, err
	}
	if !called && last == 0 {
		// A fresh counter (an incoming copy's): MAXVALUE must stay above
		// MINVALUE 0.
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.nextval($1::regclass)`, seq).Scan(&last); err != nil {
			return 0, err
		}
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER SEQUENCE %s MAXVALUE %d`, seq, last)); err != nil {
		return 0, err
	}
	return last, nil
}

// UnclampCounter gives schema's counter its MAXVALUE back.
func UnclampCounter(ctx context.Context, tx pg.Execer, schema string, maxValue int64) error {
	seq := pgx.Identifier{schema, shsql.CounterName}.Sanitize()
	_, err := tx.Exec(ctx, fmt.Sprintf(`ALTER SEQUENCE %s MAXVALUE %d`, seq, maxValue))
	return err
}

// RetiredCopy is a retired schema as a host holds it.
type RetiredCopy struct {
	Shard  int
	Fenced bool // every table carries the fence trigger
	// Settable: its fence function is an older release's, which lets a
	// write through when a setting any role may set is on.
	Settable bool
}

// ReadRetired finds the retired copies of moved shards on a host, and
// whether each is still fenced.
func ReadRetired(ctx context.Context, q pg.Querier) (map[string]RetiredCopy, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname,
			coalesce(bool_and(EXISTS (SELECT FROM pg_catalog.pg_trigger tg
				WHERE tg.tgrelid = c.oid AND tg.tgname = $1 AND tg.tgenabled <> 'D')) FILTER (WHERE c.oid IS NOT NULL), true),
			EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.pronamespace = n.oid AND p.proname = $1 AND NOT p.prosecdef)
		FROM pg_catalog.pg_namespace n
		LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p')
		WHERE n.nspname ~ '^shard_[0-9]{4}_moved_g[0-9]+$'
		GROUP BY n.oid, n.nspname`, fenceTrigger)
	if err != nil {
		return nil, fmt.Errorf("read retired copies: %w", err)
	}
	out := map[string]RetiredCopy{}
	var name string
	var fenced, settable bool
	_, err = pgx.ForEachRow(rows, []any{&name, &fenced, &settable}, func() error {
		var id int
		fmt.Sscanf(name, "shard_%04d_", &id)
		out[name] = RetiredCopy{Shard: id, Fenced: fenced, Settable: settable}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read retired copies: %w", err)
	}
	return out, nil
}

package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// An online move checks the copy without scanning it while writes are
// refused, and without scanning it at all when one run copies it and
// cuts over. From a moment before the slot's snapshot, a row trigger on
// the source logs every change to a table (the row count's change and the
// checksum's) in the move's delta table, in the changing transaction
// itself; on the target, the same trigger is made once the copy is in,
// before the subscription starts, and fires for the apply worker (ENABLE
// ALWAYS). The copy itself is checked by construction: the source sent
// exactly the rows of its snapshot and the target stored as many (the
// COPYs' counts), byte for byte. Under the fence, with the target caught
// up, a table's count and checksum on a host are then the copy's plus the
// logged changes the copy did not hold: on the source those its snapshot
// did not see (pg_visible_in_snapshot on the logging transaction's id), on
// the target all of them. Comparing the two hosts costs a pass over the
// changes made since the copy, not over the table. Each host's figures
// come from its own rows: the source's from the writers', the target's
// from what its apply worker stored.
//
// Before the fence the changes logged so far are summed (fold), each host
// at a snapshot of its own, so that the pass under the fence reads only
// what came after. A move resumed after its copy, whose figures were in
// memory only, scans each table on both hosts before the fence instead
// (prescan: count and checksum, each scan at a snapshot of its own), and
// the log is read from those scans' snapshots on.
//
// A TRUNCATE, which row triggers do not see, is logged as a marker and
// sends the check back to full scans under the fence, as does a move
// resumed after the fence went up.

const (
	// deltaTrigger names the row trigger that logs changes, and
	// deltaTruncate the statement trigger that logs a TRUNCATE.
	deltaTrigger  = "shardid_delta"
	deltaTruncate = "shardid_delta_truncate"
)

// checksumSettings fix what a row's text looks like, for the tables whose
// checksum is taken over their rows' text.
var checksumSettings = [][2]string{
	{"TimeZone", "UTC"}, {"DateStyle", "ISO, MDY"}, {"IntervalStyle", "postgres"},
	{"extra_float_digits", "1"}, {"bytea_output", "hex"},
}

// rowHash is the 64-bit hash of row that checksums sum: the row's own
// hashing when every column type has an extended hash function, its text's
// otherwise.
func rowHash(row string, text bool) string {
	if text {
		return `pg_catalog.hashtextextended(` + row + `::text, 0)`
	}
	return `pg_catalog.hash_record_extended(` + row + `, 0)`
}

// deltaTable is the move's change log on a host, in its shardid schema.
func deltaTable(rec *MoveRecord) string {
	return pgx.Identifier{"shardid", rec.replName + "_delta"}.Sanitize()
}

// deltaFunc is the trigger function that logs a change, hashing rows as
// records or as text.
func deltaFunc(rec *MoveRecord, text bool) string {
	suffix := "_delta_rec"
	if text {
		suffix = "_delta_txt"
	}
	return pgx.Identifier{"shardid", rec.replName + suffix}.Sanitize()
}

// hashesAsText reports whether table's rows must be hashed as text: some
// column type has no extended hash function, or carries an OID
// (oidColumns): hash_record_extended hashes an enum or a regclass by its
// OID, which differs from one database to the next, so the same rows
// would sum differently on the two hosts. It hashes a row of NULLs,
// which still looks every column's function up.
func hashesAsText(ctx context.Context, db shardmgr.Querier, table string) (bool, error) {
	byOID, err := oidColumns(ctx, db, table)
	if err != nil || byOID {
		return byOID, err
	}
	var h int64
	err = db.QueryRow(ctx, fmt.Sprintf(`SELECT pg_catalog.hash_record_extended(pg_catalog.jsonb_populate_record(NULL::%s, '{}'), 0)`, table)).Scan(&h)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return true, nil
	}
	return false, err
}

// oidColumns reports whether a column of table holds a value that
// PostgreSQL stores (and hashes, and sends in binary) as an OID of the
// database it is in: an enum, oid, or a reg* type (regclass, regtype,
// regproc...), alone or inside an array, a domain, a range or a
// composite type. Such a value means the same on the two hosts only as
// text.
func oidColumns(ctx context.Context, q shardmgr.Querier, table string) (bool, error) {
	var byOID bool
	err := q.QueryRow(ctx, `WITH RECURSIVE ty(oid) AS (
			SELECT a.atttypid FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
			UNION
			SELECT x.oid FROM ty JOIN pg_catalog.pg_type t ON t.oid = ty.oid, LATERAL (
				SELECT t.typbasetype UNION ALL SELECT t.typelem
				UNION ALL SELECT r.rngsubtype FROM pg_catalog.pg_range r WHERE r.rngtypid = t.oid
				UNION ALL SELECT a.atttypid FROM pg_catalog.pg_attribute a WHERE t.typrelid <> 0 AND a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
			) x(oid) WHERE x.oid <> 0)
		SELECT EXISTS (SELECT FROM ty JOIN pg_catalog.pg_type t ON t.oid = ty.oid
			WHERE t.typtype = 'e' OR (t.typnamespace = 'pg_catalog'::regnamespace AND (t.typname = 'oid' OR t.typname LIKE 'reg%')))`, table).Scan(&byOID)
	return byOID, err
}

// installDelta creates the move's delta table and trigger functions on a
// host and the triggers on every table; onTarget makes them fire for the
// apply worker. It is idempotent.
func (mo *mover) installDelta(ctx context.Context, db *pgxpool.Pool, rec *MoveRecord, tables []string, text map[string]bool, onTarget bool) error {
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+deltaTable(rec)+` (
		tbl text NOT NULL,
		xid pg_catalog.xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
		n int,     -- change of the row count; NULL marks a TRUNCATE
		h numeric  -- change of the checksum
	)`); err != nil {
		return err
	}
	// The functions run as the mover (SECURITY DEFINER, search_path
	// pinned), not as the writer, who needs no right in the shardid schema
	// to write the table; PUBLIC may not call them (a trigger fires
	// without EXECUTE).
	for _, asText := range []bool{false, true} {
		if err := fence.CheckOwner(ctx, db, deltaFunc(rec, asText)+"()"); err != nil {
			return err
		}
		set := []string{"SECURITY DEFINER SET search_path = pg_catalog, pg_temp"}
		if asText {
			for _, s := range checksumSettings {
				set = append(set, fmt.Sprintf("SET %s = %s", s[0], pg.QuoteLiteral(s[1])))
			}
		}
		if _, err := db.Exec(ctx, fmt.Sprintf(`CREATE OR REPLACE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql %[2]s AS $shardid$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO %[3]s (tbl, n, h) VALUES (TG_TABLE_NAME, 1, %[4]s);
  ELSIF TG_OP = 'UPDATE' THEN
    INSERT INTO %[3]s (tbl, n, h) VALUES (TG_TABLE_NAME, 0, %[4]s::numeric - %[5]s);
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO %[3]s (tbl, n, h) VALUES (TG_TABLE_NAME, -1, -(%[5]s)::numeric);
  ELSE
    INSERT INTO %[3]s (tbl) VALUES (TG_TABLE_NAME);
  END IF;
  RETURN NULL;
END
$shardid$;
REVOKE ALL ON FUNCTION %[1]s() FROM PUBLIC`, deltaFunc(rec, asText), strings.Join(set, " "), deltaTable(rec), rowHash("NEW", asText), rowHash("OLD", asText))); err != nil {
			return err
		}
	}
	lockTimeout := mo.opts.LockTimeout
	if onTarget {
		// Only the apply worker waits behind these locks on the target:
		// wait past deadlock_timeout, which cancels an autovacuum in the
		// way (likely right after the initial copy).
		lockTimeout = max(lockTimeout, 5*time.Second)
	}
	install := func() error {
		return pg.WithLockRetry(ctx, db, lockTimeout, 30, func(tx pgx.Tx) error {
			if !onTarget {
				// The fence, open for now: raising it under the cut-over
				// is then a function swap (fence.Raise).
				if err := fence.Install(ctx, tx, rec.Schema, false); err != nil {
					return err
				}
			}
			return mo.deltaTriggers(ctx, tx, rec, tables, text, onTarget)
		})
	}
	if onTarget {
		return install()
	}
	return pg.WithTablesIdle(ctx, db, rec.Schema, install)
}

// deltaTriggers creates the move's change-log triggers on tables.
func (mo *mover) deltaTriggers(ctx context.Context, tx pgx.Tx, rec *MoveRecord, tables []string, text map[string]bool, onTarget bool) error {
	for _, t := range tables {
		qt := pgx.Identifier{rec.Schema, t}.Sanitize()
		fn := deltaFunc(rec, text[t])
		stmts := []string{
			fmt.Sprintf(`CREATE OR REPLACE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s()`, deltaTrigger, qt, fn),
			fmt.Sprintf(`CREATE OR REPLACE TRIGGER %s AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s()`, deltaTruncate, qt, fn),
		}
		if onTarget {
			stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %s ENABLE ALWAYS TRIGGER %s, ENABLE ALWAYS TRIGGER %s`, qt, deltaTrigger, deltaTruncate))
		}
		for _, sql := range stmts {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%s: %w", qt, err)
			}
		}
	}
	return nil
}

// muteDelta makes the move's trigger functions on a host log nothing, if
// they exist: a function swap, without the table locks dropping the
// triggers takes.
func muteDelta(ctx context.Context, tx pg.Execer, rec *MoveRecord) error {
	for _, asText := range []bool{false, true} {
		fn := deltaFunc(rec, asText)
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regprocedure($1) IS NOT NULL`, fn+"()").Scan(&exists); err != nil {
			return err
		}
		if !exists {
			continue
		}
		if _, err := tx.Exec(ctx, `CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $shardid$ BEGIN RETURN NULL; END $shardid$`); err != nil {
			return err
		}
	}
	return nil
}

// dropDelta removes the move's triggers (with their functions) and delta
// table from a host. It is idempotent.
func dropDelta(ctx context.Context, db pg.Execer, rec *MoveRecord) error {
	_, err := db.Exec(ctx, fmt.Sprintf(`DROP FUNCTION IF EXISTS %s(), %s() CASCADE`, deltaFunc(rec, false), deltaFunc(rec, true)))
	if err == nil {
		_, err = db.Exec(ctx, `DROP TABLE IF EXISTS `+deltaTable(rec))
	}
	return err
}

// dropDeltas takes a move's change logging away from both hosts, as far
// as they answer: a move that stops before its fence must not leave the
// source logging every write.
func (mo *mover) dropDeltas(ctx context.Context, rec *MoveRecord) {
	mo.takeCopied(rec.ID)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, host := range []string{rec.From, rec.To} {
		db, err := mo.pool(ctx, host)
		if err == nil {
			err = pg.WithLockRetry(ctx, db, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error { return muteDelta(ctx, tx, rec) })
		}
		if err == nil {
			err = pg.WithTablesIdle(ctx, db, rec.Schema, func() error {
				return pg.WithLockRetry(ctx, db, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error { return dropDelta(ctx, tx, rec) })
			})
		}
		if err != nil {
			mo.log.Warn("could not remove a move's change log (abort or resume the move)", "id", rec.ID, "host", host, "err", err)
		}
	}
}

// scanSum is one table's count and checksum on one host, and the snapshot
// they were taken at.
type scanSum struct {
	tableSum
	snapshot string
}

// prescan is what an online move knows of each table on both hosts
// before its fence: a count and checksum, and the snapshot after which the
// change log holds the rest.
type prescan struct {
	tables []string
	text   map[string]bool
	sums   [][2]scanSum // per table: source, target
	// fromCopy: the figures are the copy's, by construction (checksum 0
	// on both hosts, the same rows), not scans'.
	fromCopy bool
}

// textTables reports, for each of schema's tables on a host, whether its
// rows are hashed as text (hashesAsText).
func textTables(ctx context.Context, db shardmgr.Querier, schema string, tables []string) (map[string]bool, error) {
	text := map[string]bool{}
	for _, t := range tables {
		var err error
		if text[t], err = hashesAsText(ctx, db, pgx.Identifier{schema, t}.Sanitize()); err != nil {
			return nil, err
		}
	}
	return text, nil
}

// logSource starts logging the changes to tables on an online move's
// source, before its slot's snapshot is taken, and takes away the
// target's log of an earlier attempt (its copy starts over, and the log's
// triggers would fire for it). It returns how each table is hashed.
func (mo *mover) logSource(ctx context.Context, mv *move, tables []string) (map[string]bool, error) {
	text, err := textTables(ctx, mv.src, mv.Schema, tables)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", mv.From, err)
	}
	if err := pg.WithLockRetry(ctx, mv.dst, mo.opts.LockTimeout, 30, func(tx pgx.Tx) error { return dropDelta(ctx, tx, mv.MoveRecord) }); err != nil {
		return nil, fmt.Errorf("target %s: drop an earlier change log: %w", mv.To, err)
	}
	if err := mo.installDelta(ctx, mv.src, mv.MoveRecord, tables, text, false); err != nil {
		return nil, fmt.Errorf("source %s: log changes: %w", mv.From, err)
	}
	return text, nil
}

// logTarget starts logging the changes the apply worker makes on an
// online move's target, once the copy is in and before the subscription
// starts, and returns what the move knows of each table by construction:
// counts (the rows copied, per table) at the slot's snapshot on the
// source, and at a snapshot taken before the log on the target, which
// nothing but the apply worker writes (the fence).
func (mo *mover) logTarget(ctx context.Context, mv *move, tables []string, text map[string]bool, slotSnapshot string, counts []int64) (*prescan, error) {
	var dstSnapshot string
	if err := mv.dst.QueryRow(ctx, `SELECT pg_catalog.pg_current_snapshot()::text`).Scan(&dstSnapshot); err != nil {
		return nil, fmt.Errorf("target %s: %w", mv.To, err)
	}
	if err := mo.installDelta(ctx, mv.dst, mv.MoveRecord, tables, text, true); err != nil {
		return nil, fmt.Errorf("target %s: log changes: %w", mv.To, err)
	}
	ps := &prescan{tables: tables, text: text, sums: make([][2]scanSum, len(tables)), fromCopy: true}
	for i := range tables {
		ps.sums[i][0] = scanSum{tableSum{rows: counts[i], sum: "0"}, slotSnapshot}
		ps.sums[i][1] = scanSum{tableSum{rows: counts[i], sum: "0"}, dstSnapshot}
	}
	return ps, nil
}

// sumsNow reads each table's count and checksum on both hosts now: ps's
// figures plus the changes logged since its snapshots, each with the
// snapshot of the statement that read them (the one its scan of the log
// read at). truncated: a table was truncated since, which the log's
// figures cannot tell.
func (ps *prescan) sumsNow(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) (now [][2]scanSum, truncated bool, err error) {
	now = make([][2]scanSum, len(ps.tables))
	var cut atomic.Bool
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, t := range ps.tables {
		for side, db := range []*pgxpool.Pool{src, dst} {
			g.Go(func() error {
				s := ps.sums[i][side]
				var truncates int64
				err := db.QueryRow(gctx, `SELECT (SELECT pg_catalog.pg_current_snapshot())::text, count(*) FILTER (WHERE n IS NULL),
						$2::bigint + coalesce(sum(n), 0), ($3::numeric + coalesce(sum(h), 0))::text
					FROM `+deltaTable(rec)+` WHERE tbl = $1 AND NOT pg_catalog.pg_visible_in_snapshot(xid, $4::pg_catalog.pg_snapshot)`,
					t, s.rows, s.sum, s.snapshot).Scan(&now[i][side].snapshot, &truncates, &now[i][side].rows, &now[i][side].sum)
				if err != nil {
					return fmt.Errorf("changes to %s.%s: %w", rec.Schema, t, err)
				}
				if truncates > 0 {
					cut.Store(true)
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	return now, cut.Load(), nil
}

// fold adds to ps the changes logged on each host that a snapshot of now
// sees, and moves ps's snapshots to those: the check under the fence then
// reads only the changes after them. (A transaction that a snapshot sees,
// every later snapshot sees.) ok is false when a table was truncated
// since: then ps cannot tell, and is left as it was.
func (ps *prescan) fold(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) (ok bool, err error) {
	now, truncated, err := ps.sumsNow(ctx, src, dst, rec)
	if err != nil || truncated {
		return false, err
	}
	ps.sums = now
	return true, nil
}

// scanTable counts and checksums table in one statement, and returns the
// statement's snapshot with them.
func scanTable(ctx context.Context, db *pgxpool.Pool, table string, text bool) (scanSum, error) {
	var s scanSum
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if text {
			// As the change log's functions run: search_path pinned too
			// (a regclass's text names the schema unless it is on the path).
			for _, set := range append(checksumSettings, [2]string{"search_path", "pg_catalog, pg_temp"}) {
				if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config($1, $2, true)`, set[0], set[1]); err != nil {
					return err
				}
			}
		}
		return tx.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT pg_catalog.pg_current_snapshot())::text, count(*), coalesce(sum(%s), 0)::text FROM ONLY %s t`,
			rowHash("t", text), table)).Scan(&s.snapshot, &s.rows, &s.sum)
	})
	return s, err
}

// prescan installs the delta triggers on both hosts and scans every table
// on both. On an error its caller (prepareCutover) takes the triggers away.
func (mo *mover) prescan(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord) (*prescan, error) {
	tables, err := rowTables(ctx, src, rec.Schema)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", rec.From, err)
	}
	ps := &prescan{tables: tables, sums: make([][2]scanSum, len(tables))}
	if ps.text, err = textTables(ctx, src, rec.Schema, tables); err != nil {
		return nil, fmt.Errorf("source %s: %w", rec.From, err)
	}
	if err := mo.installDelta(ctx, src, rec, tables, ps.text, false); err != nil {
		return nil, fmt.Errorf("source %s: log changes: %w", rec.From, err)
	}
	if err := mo.installDelta(ctx, dst, rec, tables, ps.text, true); err != nil {
		return nil, fmt.Errorf("target %s: log changes: %w", rec.To, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, t := range tables {
		qt := pgx.Identifier{rec.Schema, t}.Sanitize()
		for side, db := range []*pgxpool.Pool{src, dst} {
			g.Go(func() error {
				s, err := scanTable(gctx, db, qt, ps.text[t])
				if err != nil {
					return fmt.Errorf("checksum %s: %w", qt, err)
				}
				ps.sums[i][side] = s
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return ps, nil
}

// compareDelta compares every table's count and checksum on both hosts
// now, from ps and the changes logged since, and returns the rows
// counted. ok is false when a table was truncated since: then only full
// scans can tell.
func compareDelta(ctx context.Context, src, dst *pgxpool.Pool, rec *MoveRecord, ps *prescan) (rows int64, ok bool, err error) {
	now, truncated, err := ps.sumsNow(ctx, src, dst, rec)
	if err != nil || truncated {
		return 0, false, err
	}
	sums := make([][2]tableSum, len(now))
	for i, s := range now {
		sums[i] = [2]tableSum{s[0].tableSum, s[1].tableSum}
	}
	rows, err = sameSums(ps.tables, sums)
	return rows, true, err
}

// sameSums compares each table's source and target figures and returns the
// source's rows.
func sameSums(tables []string, sums [][2]tableSum) (int64, error) {
	var rows int64
	var bad []string
	for i, t := range tables {
		s, d := sums[i][0], sums[i][1]
		if s != d {
			bad = append(bad, fmt.Sprintf("%s: source %d rows (checksum %s), target %d rows (checksum %s)", t, s.rows, s.sum, d.rows, d.sum))
		}
		rows += s.rows
	}
	if len(bad) > 0 {
		return 0, fmt.Errorf("%w: %s", ErrMoveCheck, strings.Join(bad, "; "))
	}
	return rows, nil
}

// sameTables reports whether the prescan covered exactly tables.
func (ps *prescan) sameTables(tables []string) bool { return slices.Equal(ps.tables, tables) }

package rebalance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// An online move copies the rows itself, as Citus does, rather than let
// the subscription's table sync workers do it: the slot is created on a
// replication connection that exports its snapshot, every table is copied
// at that snapshot (binary COPY, several tables at once) into target
// tables without their indexes (secondary ones and the primary key), the
// indexes are built after the copy, and only then does the subscription start, with copy_data = false
// from that slot: it streams what changed since the snapshot. So the
// subscription needs one worker (its apply worker), never a table sync
// worker per table, and the copy runs at the speed of COPY.

const (
	// copyTables is how many tables of one move are copied (and indexes
	// built) at once.
	copyTables = 4
	// copyTablesAll bounds the table copies of every move of a manager at
	// once (a batch copies its moves together, and batches run side by
	// side): each takes a connection on both hosts.
	copyTablesAll = 8
	// copyRanges is how many ranges of its integer primary key a big
	// table is copied in at once, each a COPY of its own at the same
	// snapshot.
	copyRanges = 4
	// slotTimeout bounds the creation of the slot, which waits for the
	// transactions running on the source to end (its snapshot must see
	// all or nothing of each).
	slotTimeout = 5 * time.Minute
)

// snapshotSlot is a logical replication slot made on a replication
// connection, with the snapshot it exported: the rows seen in that
// snapshot plus the changes the slot streams are the tables exactly. The
// snapshot lives as long as the connection stays open and idle.
type snapshotSlot struct {
	conn     *pgconn.PgConn
	snapshot string

	mu   sync.Mutex
	lost error // why the snapshot is gone, once explain found out
}

// createSnapshotSlot creates logical replication slot name (pgoutput) on
// the database of host and keeps its exported snapshot open, on a
// replication connection within the handle's budget. The session sits
// idle in transaction for the whole copy: like every session of the
// handle it runs with the server's timeouts off (pgsession.OwnTimeouts;
// idle_in_transaction_session_timeout killed it, issue 28), which
// keepTimeouts, in tests, undoes.
func createSnapshotSlot(ctx context.Context, c *cluster.Cluster, host, name string, keepTimeouts bool) (*snapshotSlot, error) {
	cfg, err := c.HostConnConfig(host, cluster.Session{})
	if err != nil {
		return nil, err
	}
	if keepTimeouts {
		delete(cfg.RuntimeParams, "idle_in_transaction_session_timeout")
	}
	cfg.RuntimeParams["replication"] = "database"
	wctx, cancel := context.WithTimeout(ctx, slotTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(wctx, &cfg.Config)
	if err != nil {
		return nil, fmt.Errorf("replication connection: %w", err)
	}
	res, err := conn.Exec(wctx, `CREATE_REPLICATION_SLOT `+pgx.Identifier{name}.Sanitize()+` LOGICAL pgoutput EXPORT_SNAPSHOT`).ReadAll()
	if err == nil && (len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 3) {
		err = errors.New("unexpected answer to CREATE_REPLICATION_SLOT")
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		if wctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no replication slot within %s: it waits for the transactions running on the source to end: %w", slotTimeout, err)
		}
		return nil, fmt.Errorf("create replication slot %s: %w", name, err)
	}
	return &snapshotSlot{conn: conn, snapshot: string(res[0].Rows[0][2])}, nil
}

// explain says why taking the slot's snapshot failed with err. When the
// snapshot is no longer there (invalid snapshot identifier, or on 18 the
// snapshot does not exist), it asks the
// session that held it: a session the server ended answers with why,
// and the error names the setting that ended it. It asks once; the
// snapshot is lost either way.
func (s *snapshotSlot) explain(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	// Up to 17 "invalid snapshot identifier" (22023); 18 says
	// `snapshot "..." does not exist` (42704).
	gone := pgErr.Code == pgerrcode.InvalidParameterValue ||
		(pgErr.Code == pgerrcode.UndefinedObject && strings.HasPrefix(pgErr.Message, "snapshot "))
	if !gone {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = errors.New("the session that held it ended")
		if s.conn != nil {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_, perr := s.conn.Exec(c, `SELECT 1`).ReadAll()
			cancel()
			if perr != nil {
				s.lost = lostSnapshot(perr)
			}
		}
	}
	return fmt.Errorf("%w: %w (%w)", ErrSnapshotLost, s.lost, err)
}

// lostSnapshot names what ended the session that held a slot's snapshot,
// from the server's last word to it.
func lostSnapshot(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("the session that held it ended: %w", err)
	}
	setting := pgsession.TimeoutSetting(err)
	if setting == "" {
		return fmt.Errorf("the source ended the session that held it: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	return fmt.Errorf("the source ended the session that held it (%s): %s", setting, pgErr.Message)
}

// pgSnapshot reads the slot's snapshot as a pg_snapshot (its xmin, xmax
// and running transactions), in a transaction on the source that takes it.
func (s *snapshotSlot) pgSnapshot(ctx context.Context, src *pgxpool.Pool) (string, error) {
	var snap string
	err := pgx.BeginTxFunc(ctx, src, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET TRANSACTION SNAPSHOT `+pg.QuoteLiteral(s.snapshot)); err != nil {
			return fmt.Errorf("take the slot's snapshot: %w", s.explain(ctx, err))
		}
		return tx.QueryRow(ctx, `SELECT pg_catalog.pg_current_snapshot()::text`).Scan(&snap)
	})
	if err != nil {
		return "", err
	}
	return orderedSnapshot(snap)
}

// orderedSnapshot returns snap ("xmin:xmax:xip,...") as a pg_snapshot's
// input accepts it. A slot's exported snapshot may have its xmin past its
// xmax (seen: "4261:4258:"), which pg_snapshot's input refuses. The
// server's visibility tests ask xmin first (XidInMVCCSnapshot, and
// pg_visible_in_snapshot alike): every transaction below xmin is finished,
// every other one is not, whatever xmax and xip say. So such a snapshot
// is "xmin:xmin:", and the copy read at it saw exactly that.
func orderedSnapshot(snap string) (string, error) {
	parts := strings.SplitN(snap, ":", 3)
	if len(parts) != 3 {
		return "", fmt.Errorf("unexpected snapshot %q", snap)
	}
	xmin, err1 := strconv.ParseUint(parts[0], 10, 64)
	xmax, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return "", fmt.Errorf("unexpected snapshot %q: %w", snap, err)
	}
	if xmin <= xmax {
		return snap, nil
	}
	return fmt.Sprintf("%d:%d:", xmin, xmin), nil
}

// close ends the exported snapshot (the slot stays).
func (s *snapshotSlot) close(ctx context.Context) {
	if s != nil && s.conn != nil {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		s.conn.Close(c)
		s.conn = nil
	}
}

// indexDef is an index of the shard that the copy builds after the rows
// are in, as the source defines it.
type indexDef struct {
	schema, table, name string
	def                 string // CREATE [UNIQUE] INDEX ..., from pg_get_indexdef
	pkey                string // the primary key constraint the index backs, or ""
}

func (d indexDef) qname() string  { return pgx.Identifier{d.schema, d.name}.Sanitize() }
func (d indexDef) qtable() string { return pgx.Identifier{d.schema, d.table}.Sanitize() }

// deferredIndexes are the source's indexes on tables of schema that the
// copy builds after the rows are in (cheaper than maintaining them row by
// row: BenchmarkMoveVsRawCopy): the secondary indexes and the primary
// keys, but none a foreign key refers to, no unique or exclusion
// constraint's, no replica identity index and none of a partition
// (tables lists no partitioned table, and a partition's indexes are
// built as it is filled: copy_tables.go says why). The source defines
// them: the target's schema is built to the same version, and a resumed
// move finds them there even when an attempt died between the drop and
// the build.
func deferredIndexes(ctx context.Context, q shardmgr.Querier, schema string, tables []string) ([]indexDef, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, c.relname, ic.relname, pg_catalog.pg_get_indexdef(i.indexrelid), coalesce(k.conname, '')
		FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
		JOIN pg_catalog.pg_class c ON c.oid = i.indrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_catalog.pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = c.oid AND k.contype = 'p'
		WHERE n.nspname = $1 AND c.relname = ANY($2) AND c.relkind = 'r' AND NOT c.relispartition
		  AND (k.oid IS NOT NULL OR NOT i.indisprimary) AND NOT i.indisreplident
		  AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint o WHERE o.conindid = i.indexrelid AND o.contype <> 'p')
		ORDER BY 2, 3`, schema, tables)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (indexDef, error) {
		var d indexDef
		err := row.Scan(&d.schema, &d.table, &d.name, &d.def, &d.pkey)
		return d, err
	})
}

// copyAtSnapshot fills the target's tables with the source's rows as
// snapshot sees them: it empties them and drops their deferred indexes,
// foreign keys and user triggers, copies the tables (copyTables at once),
// then builds the indexes and makes the foreign keys and triggers
// (copy_deferred.go). It returns the rows copied, per table.
func (mo *mover) copyAtSnapshot(ctx context.Context, mv *move, slot *snapshotSlot, tables []string) ([]int64, error) {
	indexes, err := deferredIndexes(ctx, mv.src, mv.Schema, tables)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", mv.From, err)
	}
	deferred, err := readDeferred(ctx, mv.src, mv.Schema)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", mv.From, err)
	}
	err = pgx.BeginFunc(ctx, mv.dst, func(tx pgx.Tx) error {
		if err := fence.Pass(ctx, tx); err != nil {
			return err
		}
		if err := deferred.drop(ctx, tx); err != nil {
			return err
		}
		if err := dropIndexes(ctx, tx, indexes); err != nil {
			return err
		}
		if len(tables) == 0 {
			return nil
		}
		names := make([]string, len(tables))
		for i, t := range tables {
			names[i] = pgx.Identifier{mv.Schema, t}.Sanitize()
		}
		_, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(names, ", "))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("target %s: empty the tables: %w", mv.To, err)
	}
	// A piece is a table, or one range of a big table's key.
	type piece struct{ table, where string }
	var pieces []piece
	for _, t := range tables {
		minBytes := int64(rangeCopyMinBytes)
		if mo.opts.rangeCopyMinBytes > 0 {
			minBytes = mo.opts.rangeCopyMinBytes
		}
		ranges, err := copyRangesOf(ctx, mv.src, mv.Schema, t, minBytes)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", mv.From, err)
		}
		if ranges == nil {
			pieces = append(pieces, piece{t, ""})
		}
		for _, r := range ranges {
			pieces = append(pieces, piece{t, r})
		}
	}
	t0 := time.Now()
	counts := make([]int64, len(pieces))
	counter := &copyCounter{row: mo.opts.copyRow}
	stop := mo.reportCopy(ctx, mv, len(tables), 0, counter)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyTables)
	for i, p := range pieces {
		g.Go(func() error {
			select {
			case mo.copies <- struct{}{}:
				defer func() { <-mo.copies }()
			case <-gctx.Done():
				return gctx.Err()
			}
			n, err := mo.copyTableAt(gctx, mv, tableCopy{table: p.table, where: p.where, slot: slot, counter: counter})
			if err != nil {
				return fmt.Errorf("copy %s: %w", pgx.Identifier{mv.Schema, p.table}.Sanitize(), err)
			}
			counts[i] = n
			return nil
		})
	}
	err = g.Wait()
	stop()
	if err != nil {
		return nil, err
	}
	var rows int64
	perTable := make([]int64, len(tables))
	for i, n := range counts {
		rows += n
		perTable[slices.Index(tables, pieces[i].table)] += n
	}
	mo.progress(mv.MoveRecord, MoveProgress{Phase: PhaseCopy, Tables: len(tables), Rows: rows, Lag: -1})
	t1 := time.Now()
	if err := buildIndexes(ctx, mv.dst, indexes); err != nil {
		return nil, fmt.Errorf("target %s: build the indexes after the copy: %w", mv.To, err)
	}
	if err := deferred.create(ctx, mv.dst); err != nil {
		return nil, fmt.Errorf("target %s: after the copy: %w", mv.To, err)
	}
	mo.log.Info("copied at the slot's snapshot", "id", mv.ID, "tables", len(tables), "pieces", len(pieces), "rows", rows,
		"copy", t1.Sub(t0), "indexes", len(indexes), "build", time.Since(t1))
	return perTable, nil
}

// dropIndexes drops the deferred indexes from the target's tables, in
// tx (which then empties them), the primary keys as constraints.
func dropIndexes(ctx context.Context, tx pg.Execer, indexes []indexDef) error {
	for _, ix := range indexes {
		sql := `DROP INDEX IF EXISTS ` + ix.qname()
		if ix.pkey != "" {
			sql = `ALTER TABLE ` + ix.qtable() + ` DROP CONSTRAINT IF EXISTS ` + pgx.Identifier{ix.pkey}.Sanitize()
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: drop %s until the rows are in: %w", ix.qtable(), ix.name, err)
		}
	}
	return nil
}

// buildIndexes creates the indexes the target lacks, several at once
// (CREATE INDEX on one table do not wait for each other), then makes the
// primary keys of those that back one.
func buildIndexes(ctx context.Context, dst pg.Execer, indexes []indexDef) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyTables)
	for _, ix := range indexes {
		g.Go(func() error {
			var has bool
			if err := dst.QueryRow(gctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL`, ix.qname()).Scan(&has); err != nil || has {
				return err
			}
			if _, err := dst.Exec(gctx, ix.def); err != nil {
				return fmt.Errorf("%s: %w", ix.qname(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, ix := range indexes {
		if ix.pkey == "" {
			continue
		}
		var has bool
		if err := dst.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`,
			ix.qtable(), ix.pkey).Scan(&has); err != nil {
			return err
		}
		if has {
			continue
		}
		if _, err := dst.Exec(ctx, `ALTER TABLE `+ix.qtable()+` ADD CONSTRAINT `+pgx.Identifier{ix.pkey}.Sanitize()+
			` PRIMARY KEY USING INDEX `+pgx.Identifier{ix.name}.Sanitize()); err != nil {
			return fmt.Errorf("%s: primary key: %w", ix.qtable(), err)
		}
	}
	return nil
}

// copyColumns lists table's stored columns, quoted, in order.
func copyColumns(ctx context.Context, q shardmgr.Querier, schema, table string) (string, error) {
	rows, err := q.Query(ctx, `SELECT pg_catalog.quote_ident(a.attname) FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum`,
		pgx.Identifier{schema, table}.Sanitize())
	if err != nil {
		return "", err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(cols, ", "), nil
}

// copySQL is how one table is copied: the statements on each side and
// the settings both sessions take first.
type copySQL struct {
	out, in  string
	settings [][2]string
}

// copyTextSettings fix the text COPY writes and reads on both hosts: the
// same text means the same value (a regclass names its schema).
var copyTextSettings = [][2]string{
	{"DateStyle", "ISO, MDY"}, {"IntervalStyle", "postgres"}, {"extra_float_digits", "3"},
	{"bytea_output", "hex"}, {"TimeZone", "UTC"}, {"search_path", "pg_catalog, pg_temp"},
}

// copyStatements builds the COPY statements of table (limited to where,
// when not empty): in binary format, column by name, unless a column
// holds OIDs (oidColumns: binary COPY sends a regclass as the source's
// OID, which names another relation, or none, on the target), which is
// copied as text.
func copyStatements(ctx context.Context, q shardmgr.Querier, schema, table, where string) (copySQL, error) {
	list, err := copyColumns(ctx, q, schema, table)
	if err != nil {
		return copySQL{}, err
	}
	qt := pgx.Identifier{schema, table}.Sanitize()
	byOID, err := oidColumns(ctx, q, qt)
	if err != nil {
		return copySQL{}, err
	}
	format, settings := "binary", [][2]string(nil)
	if byOID {
		format, settings = "text", copyTextSettings
	}
	filter := ""
	if where != "" {
		filter = " WHERE " + where
	}
	return copySQL{
		out:      fmt.Sprintf(`COPY (SELECT %s FROM ONLY %s%s) TO STDOUT (FORMAT %s)`, list, qt, filter, format),
		in:       fmt.Sprintf(`COPY %s (%s) FROM STDIN (FORMAT %s)`, qt, list, format),
		settings: settings,
	}, nil
}

// apply sets c's settings in the transaction tx is in.
func (c copySQL) apply(ctx context.Context, tx pg.Execer) error {
	for _, set := range c.settings {
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config($1, $2, true)`, set[0], set[1]); err != nil {
			return err
		}
	}
	return nil
}

// rangeCopyMinBytes is the size from which a table is copied in ranges
// (MoveOptions.rangeCopyMinBytes lowers it in tests).
const rangeCopyMinBytes = 64 << 20

// copyRangesOf splits a big table with a one-column integer primary key
// into up to copyRanges ranges of that key, at the boundaries of the
// key's histogram in pg_stats (equal numbers of rows, as ANALYZE saw
// them). The ranges are disjoint and cover every value whatever the
// estimates, so they only decide how evenly the work is shared. nil: one
// COPY for the whole table (small, no such key, or no statistics).
func copyRangesOf(ctx context.Context, q shardmgr.Querier, schema, table string, minBytes int64) ([]string, error) {
	var size int64
	var key *string
	var bounds []string
	err := q.QueryRow(ctx, `SELECT pg_catalog.pg_table_size(c.oid),
			(SELECT a.attname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			  WHERE i.indrelid = c.oid AND i.indisprimary AND i.indnkeyatts = 1 AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)),
			(SELECT s.histogram_bounds::text::text[] FROM pg_catalog.pg_stats s
			  JOIN pg_catalog.pg_index i ON i.indrelid = c.oid AND i.indisprimary AND i.indnkeyatts = 1
			  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
			  WHERE s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = a.attname)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, table).Scan(&size, &key, &bounds)
	if err != nil {
		return nil, err
	}
	if size < minBytes || key == nil || len(bounds) < copyRanges+1 {
		return nil, nil
	}
	col := pgx.Identifier{*key}.Sanitize()
	var cuts []int64
	for i := 1; i < copyRanges; i++ {
		v, err := strconv.ParseInt(bounds[i*(len(bounds)-1)/copyRanges], 10, 64)
		if err != nil {
			return nil, nil
		}
		if len(cuts) == 0 || v > cuts[len(cuts)-1] {
			cuts = append(cuts, v)
		}
	}
	ranges := make([]string, 0, len(cuts)+1)
	for i := range len(cuts) + 1 {
		switch {
		case i == 0:
			ranges = append(ranges, fmt.Sprintf("%s < %d", col, cuts[0]))
		case i == len(cuts):
			ranges = append(ranges, fmt.Sprintf("%s >= %d", col, cuts[i-1]))
		default:
			ranges = append(ranges, fmt.Sprintf("%s >= %d AND %s < %d", col, cuts[i-1], col, cuts[i]))
		}
	}
	return ranges, nil
}

// tableCopy is one piece of an online move's copy at the slot's
// snapshot, as copyTableAt runs it.
type tableCopy struct {
	// table is the table's name in the shard's schema.
	table string
	// where, when not empty, limits the copy to one range of the table's
	// key (copyRangesOf).
	where string
	// slot is the replication slot at whose snapshot the source is read.
	slot *snapshotSlot
	// counter counts the rows as they are sent (the move's progress).
	counter *copyCounter
}

// copyTableAt streams piece p of mv from its source, read at the slot's
// snapshot, into its target with binary COPY, on connections of its own
// (a copy never waits for a pool another move's copy holds), taken from
// the handle's budget together (a copy holding its source never waits
// for its target), the target's side in one transaction past the fence,
// the rows counted into p.counter as they go.
func (mo *mover) copyTableAt(ctx context.Context, mv *move, p tableCopy) (int64, error) {
	c, from, to, schema := mo.c, mv.From, mv.To, mv.Schema
	srcCfg, err := c.HostConnConfig(from, cluster.Session{})
	if err != nil {
		return 0, err
	}
	dstCfg, err := c.HostConnConfig(to, cluster.Session{})
	if err != nil {
		return 0, err
	}
	rctx, release, err := c.Reserve(ctx, srcCfg, dstCfg)
	if err != nil {
		return 0, err
	}
	defer release()
	src, err := pgx.ConnectConfig(rctx, srcCfg)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	defer src.Close(context.WithoutCancel(ctx))
	dst, err := pgx.ConnectConfig(rctx, dstCfg)
	if err != nil {
		return 0, fmt.Errorf("target: %w", err)
	}
	defer dst.Close(context.WithoutCancel(ctx))
	release()
	cs, err := copyStatements(ctx, src, schema, p.table, p.where)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	stx, err := src.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	defer func() { _ = stx.Rollback(context.WithoutCancel(ctx)) }()
	if mo.opts.beforeSnapshot != nil {
		mo.opts.beforeSnapshot()
	}
	if _, err := stx.Exec(ctx, `SET TRANSACTION SNAPSHOT `+pg.QuoteLiteral(p.slot.snapshot)); err != nil {
		return 0, fmt.Errorf("source: take the slot's snapshot: %w", p.slot.explain(ctx, err))
	}
	if err := cs.apply(ctx, stx); err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	var n int64
	err = pgx.BeginFunc(ctx, dst, func(dtx pgx.Tx) error {
		if err := fence.Pass(ctx, dtx); err != nil {
			return err
		}
		if err := cs.apply(ctx, dtx); err != nil {
			return err
		}
		n, err = pipeCopy(ctx, src.PgConn(), dst.PgConn(), cs.out, cs.in, p.counter)
		return err
	})
	return n, err
}

// copyBuffer is how much of a COPY's stream pipeCopy gathers before it
// passes it on. pgconn's CopyTo writes each row separately and CopyFrom
// sends each read as one CopyData message: unbuffered, a row is a socket
// write (and a wakeup of the mover) on each side, which made a move 4-5x
// slower than psql's pipe (issue 29). 64 KiB is CopyFrom's own read size.
const copyBuffer = 64 << 10

// pipeCopy runs COPY ... TO STDOUT on src into COPY ... FROM STDIN on
// dst and returns the rows stored, counting them into counter (nil: not
// counted) as they are sent. The target must store as many rows as the
// source sent (an online move's check counts on it).
func pipeCopy(ctx context.Context, src, dst *pgconn.PgConn, out, in string, counter *copyCounter) (int64, error) {
	var sent int64
	n, err := copyThrough(
		func(w io.Writer) error {
			tag, err := src.CopyTo(ctx, counter.countRows(w), out)
			sent = tag.RowsAffected()
			return err
		},
		func(r io.Reader) (int64, error) {
			tag, err := dst.CopyFrom(ctx, r, in)
			return tag.RowsAffected(), err
		})
	if err == nil && n != sent {
		err = fmt.Errorf("%w: the source sent %d rows, the target stored %d", ErrMoveCheck, sent, n)
	}
	return n, err
}

// copyThrough runs copyTo, which writes a stream, into copyFrom, which
// reads it, through a pipe and a buffer of copyBuffer bytes. Either side
// failing ends the other (the pipe is closed with its error: a writer
// gets it on its next write, a reader instead of EOF, so the target's
// COPY is abandoned rather than committed short), and copyThrough
// returns only when both have returned, with the error of the side that
// failed first.
func copyThrough(copyTo func(io.Writer) error, copyFrom func(io.Reader) (int64, error)) (int64, error) {
	pr, pw := io.Pipe()
	var g errgroup.Group
	g.Go(func() error {
		bw := bufio.NewWriterSize(pw, copyBuffer)
		err := copyTo(bw)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err) // nil: the reader sees EOF
		return err
	})
	n, err := copyFrom(pr)
	pr.CloseWithError(err) // nil: a write still to come gets io.ErrClosedPipe
	// The source's own failure is the cause when both failed (the target
	// then reports only that its input failed); a source that failed on
	// the pipe closed with the target's error returns that same error.
	if gerr := g.Wait(); gerr != nil && !errors.Is(gerr, err) {
		err = gerr
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

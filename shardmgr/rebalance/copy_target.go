package rebalance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

// incomingComment marks a target schema as this move's, so that a resumed
// or aborted move only ever touches its own copy. Anyone can read a
// comment and predict its words: the mark that ends it is a digest of the
// move's target token, which only the catalog holds, written when the
// move creates the schema; ownTarget checks the schema's owner too.
func incomingComment(rec *MoveRecord) string {
	c := fmt.Sprintf("shardid: incoming copy of shard %d, move %d from %s", rec.Shard, rec.ID, rec.From)
	if rec.targetToken != nil {
		sum := sha256.Sum256([]byte("shardid move target\x00" + *rec.targetToken))
		c += ", mark " + hex.EncodeToString(sum[:16])
	}
	return c
}

// ownTarget reports whether the target's schema of rec is the one this
// move created: owned by the role the move runs as (the target's
// current_user), with this move's comment and mark. A schema that is
// missing is not.
func ownTarget(ctx context.Context, dst shardmgr.Querier, rec *MoveRecord) (exists, ours bool, err error) {
	var owner, me string
	var comment *string
	err = dst.QueryRow(ctx, `SELECT pg_catalog.pg_get_userbyid(n.nspowner), current_user, pg_catalog.obj_description(n.oid, 'pg_namespace')
		FROM pg_catalog.pg_namespace n WHERE n.nspname = $1`, rec.Schema).Scan(&owner, &me, &comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, owner == me && comment != nil && *comment == incomingComment(rec), nil
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
func (mo *mover) buildTarget(ctx context.Context, mv *move) error {
	if mo.m.Variant != shsql.Safe {
		return fmt.Errorf("%w: moves carry the safe generator's counter; the cluster uses %q", ErrGeneratorVariant, mo.m.Variant)
	}
	version, counterMax, err := mo.checkSource(ctx, mv)
	if err != nil {
		return err
	}
	grants, err := mo.sourceGrants(ctx, mv)
	if err != nil {
		return err
	}
	if err := mo.createTarget(ctx, mv, version); err != nil {
		return err
	}
	srcTables, dstTables, err := sameTables(ctx, mv)
	if err != nil {
		return err
	}
	if mv.Mode == MoveOnline {
		if err := replicaIdentities(ctx, mv, srcTables); err != nil {
			return err
		}
	}
	deferred, err := readDeferred(ctx, mv.src, mv.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	if err := emptyTarget(ctx, mv, dstTables, deferred); err != nil {
		return err
	}
	if err := mo.carryGrants(ctx, mv, grants); err != nil {
		return err
	}
	sizes, err := shardSize(ctx, mv.src, mv.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	mv.Bytes, mv.Version, mv.counterMax = sizes, version, &counterMax
	built := catalog.SchemaBuilt{Version: version, CounterMax: counterMax, Bytes: sizes}
	return setPhaseBy(mv.MoveRecord, PhaseSchema, func(s catalog.Step) error { return catalog.JournalSchema(ctx, mo.catalog, s, built) })
}

// checkSource reads what the source's copy of the shard is: its
// migration version (no failure recorded; migrations given when above 0)
// and its counter's range, which the target's counter gets.
func (mo *mover) checkSource(ctx context.Context, mv *move) (version int, counterMax int64, err error) {
	src, schema := mv.src, mv.Schema
	var srcHas bool
	if err := src.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, pgx.Identifier{schema}.Sanitize()).Scan(&srcHas); err != nil {
		return 0, 0, fmt.Errorf("source %s: %w", mv.From, err)
	}
	if !srcHas {
		return 0, 0, fmt.Errorf("source %s: %w: no schema %s", mv.From, migrate.ErrShardSchemaMissing, schema)
	}
	version, failure, err := migrate.ReadShardVersion(ctx, src, schema)
	if err != nil {
		return 0, 0, fmt.Errorf("source %s: read migration version: %w", mv.From, err)
	}
	if failure != nil {
		return 0, 0, fmt.Errorf("source %s: %w at version %d (%s): fix it first", mv.From, ErrMigrationFailed, failure.Version, failure.Message)
	}
	if version > 0 && mo.opts.Migrations == nil {
		return 0, 0, fmt.Errorf("%w (the shard is at version %d)", ErrMigrationsNeeded, version)
	}
	seq := pgx.Identifier{schema, shsql.CounterName}.Sanitize()
	if err := src.QueryRow(ctx, `SELECT seqmax FROM pg_catalog.pg_sequence WHERE seqrelid = to_regclass($1)`, seq).Scan(&counterMax); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, 0, fmt.Errorf("source %s: %s is missing (the safe generator's counter)", mv.From, seq)
		}
		return 0, 0, fmt.Errorf("source %s: %w", mv.From, err)
	}
	if mv.counterMax != nil {
		counterMax = *mv.counterMax
	}
	return version, counterMax, nil
}

// createTarget makes the shard's schema on the target, fenced from its
// first moment (invariant 6): the generator with its counter stopped, the
// fence, the host's record, then the migrations up to the source's
// version, each step fencing the tables it makes. The target holds
// nothing, or this move's own copy.
func (mo *mover) createTarget(ctx context.Context, mv *move, version int) error {
	dst, schema := mv.dst, mv.Schema
	exists, ours, err := ownTarget(ctx, dst, mv.MoveRecord)
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	if exists && !ours {
		return fmt.Errorf("target %s: %w: a schema %s that this move did not make (a stray copy, or made by another role); drop it or move the shard elsewhere", mv.To, ErrTargetOccupied, schema)
	}
	p := catalog.GeneratorParams(mo.m, mv.Shard)
	p.Generator = mo.cfg.Generator // C where the target offers it (auto), as init installs
	ddl, err := shsql.Render(p)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		q := pgx.Identifier{schema}.Sanitize()
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+q); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`COMMENT ON SCHEMA %s IS %s`, q, pg.QuoteLiteral(incomingComment(mv.MoveRecord)))); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		if _, err := fence.ClampCounter(ctx, tx, schema, mv.Shard); err != nil {
			return err
		}
		if err := fence.Func(ctx, tx, schema, true); err != nil {
			return err
		}
		if err := fence.NewTables(ctx, tx, schema); err != nil {
			return err
		}
		return shardschema.RecordLocalShard(ctx, tx, mv.Shard, schema, "fenced", mo.m.Generation)
	})
	if err != nil {
		return fmt.Errorf("target %s: install the generator: %w", mv.To, err)
	}
	if version > 0 {
		conn, err := dst.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("target %s: %w", mv.To, err)
		}
		_, err = migrate.ShardOn(ctx, conn.Conn(), mv.To, mo.opts.Migrations,
			shardmgr.Shard{ID: mv.Shard, Schema: schema, Host: mv.To, State: shardmgr.StateMoving}, migrate.Options{To: version})
		conn.Release()
		if err != nil {
			return fmt.Errorf("target %s: build the schema at version %d: %w", mv.To, version, err)
		}
	}
	got, _, err := migrate.ReadShardVersion(ctx, dst, schema)
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	if got != version {
		return fmt.Errorf("%w: the target is at migration version %d, the source at %d", ErrMoveCheck, got, version)
	}
	return nil
}

// sameTables checks that the migrations made on the target the tables the
// source has (tables made outside the migrations cannot be moved).
func sameTables(ctx context.Context, mv *move) (srcTables, dstTables []string, err error) {
	srcTables, err = dataTables(ctx, mv.src, mv.Schema)
	if err != nil {
		return nil, nil, fmt.Errorf("source %s: %w", mv.From, err)
	}
	dstTables, err = dataTables(ctx, mv.dst, mv.Schema)
	if err != nil {
		return nil, nil, fmt.Errorf("target %s: %w", mv.To, err)
	}
	if !slices.Equal(srcTables, dstTables) {
		return nil, nil, fmt.Errorf("%w: the source has tables %v, the migrations made %v on the target (tables made outside the migrations cannot be moved)",
			ErrMoveCheck, srcTables, dstTables)
	}
	return srcTables, dstTables, nil
}

// replicaIdentities checks that every table of an online move can follow
// changes: a primary key or a replica identity, and logged.
func replicaIdentities(ctx context.Context, mv *move, tables []string) error {
	noKey, err := tablesWithoutIdentity(ctx, mv.src, []string{mv.Schema}, tables)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	if len(noKey[mv.Schema]) > 0 {
		return fmt.Errorf("%w: %s", ErrNoReplicaIdentity, strings.Join(noKey[mv.Schema], ", "))
	}
	unlogged, err := unloggedTables(ctx, mv.src, []string{mv.Schema})
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	if len(unlogged[mv.Schema]) > 0 {
		return fmt.Errorf("%w: %s", ErrUnloggedTable, strings.Join(unlogged[mv.Schema], ", "))
	}
	return nil
}

// emptyTarget empties the target's tables, which a migration may have
// seeded (past the fence, which kept every other writer out): the copy
// brings the source's rows. The foreign keys and user triggers the
// migrations made go first (copy_deferred.go: the copy makes them again
// after the rows are in). The fence is then put on every table.
func emptyTarget(ctx context.Context, mv *move, tables []string, deferred *deferredObjects) error {
	schema := mv.Schema
	err := pgx.BeginFunc(ctx, mv.dst, func(tx pgx.Tx) error {
		if err := fence.Pass(ctx, tx); err != nil {
			return err
		}
		if err := deferred.drop(ctx, tx); err != nil {
			return err
		}
		if len(tables) > 0 {
			names := make([]string, len(tables))
			for i, t := range tables {
				names[i] = pgx.Identifier{schema, t}.Sanitize()
			}
			if _, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(names, ", ")); err != nil {
				return err
			}
		}
		return fence.Install(ctx, tx, schema, true)
	})
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	return nil
}

// shardSize is the total relation size of schema.
func shardSize(ctx context.Context, q shardmgr.Querier, schema string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(pg_catalog.pg_total_relation_size(c.oid)), 0)::bigint FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'm', 'S')`, schema).Scan(&n)
	return n, err
}

// copyOffline copies every table from the fenced source with COPY, in one
// transaction on the target (a partitioned table leaf by leaf: rowTables),
// into tables without their deferred indexes, foreign keys and user
// triggers, which are made after the rows are in, as an online move's
// copy does (copy_snapshot.go, copy_deferred.go): COPY into a table with
// its indexes took 3.6x a raw pipe and the index builds (issue 29). The
// rows are committed before the indexes are built, several at once; a
// move stopped in between redoes the copy, as the phase is journaled
// only after the builds.
func (mo *mover) copyOffline(ctx context.Context, mv *move) error {
	src, dst := mv.src, mv.dst
	tables, err := rowTables(ctx, src, mv.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	indexes, err := deferredIndexes(ctx, src, mv.Schema, tables)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	deferred, err := readDeferred(ctx, src, mv.Schema)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	var rows int64
	t0 := time.Now()
	counter := &copyCounter{row: mo.opts.copyRow}
	stop := mo.reportCopy(ctx, mv, len(tables), 0, counter)
	err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if err := fence.Pass(ctx, tx); err != nil {
			return err
		}
		if err := deferred.drop(ctx, tx); err != nil {
			return err
		}
		if err := dropIndexes(ctx, tx, indexes); err != nil {
			return err
		}
		for _, t := range tables {
			qt := pgx.Identifier{mv.Schema, t}.Sanitize()
			if _, err := tx.Exec(ctx, `TRUNCATE `+qt); err != nil {
				return err
			}
			n, err := copyTable(ctx, src, tx, mv.Schema, t, counter)
			if err != nil {
				return fmt.Errorf("copy %s: %w", qt, err)
			}
			rows += n
		}
		return nil
	})
	stop()
	if err == nil {
		mo.progress(mv.MoveRecord, MoveProgress{Phase: PhaseCopy, Tables: len(tables), Rows: rows, Lag: -1})
	}
	if err != nil {
		return fmt.Errorf("target %s: %w", mv.To, err)
	}
	t1 := time.Now()
	if err := buildIndexes(ctx, dst, indexes); err != nil {
		return fmt.Errorf("target %s: build the indexes after the copy: %w", mv.To, err)
	}
	if err := deferred.create(ctx, dst); err != nil {
		return fmt.Errorf("target %s: after the copy: %w", mv.To, err)
	}
	mo.log.Info("copied from the fenced source", "id", mv.ID, "tables", len(tables), "rows", rows,
		"copy", t1.Sub(t0), "indexes", len(indexes), "build", time.Since(t1))
	mv.Rows = rows
	return setPhaseBy(mv.MoveRecord, PhaseCopy, func(s catalog.Step) error { return catalog.JournalCopied(ctx, mo.catalog, s, rows) })
}

// copyTable streams one table from the source into the target with COPY
// (copyStatements), the source's side in a transaction of its own, the
// target's in tx, counting the rows into counter.
func copyTable(ctx context.Context, src *pgxpool.Pool, tx pgx.Tx, schema, table string, counter *copyCounter) (int64, error) {
	cs, err := copyStatements(ctx, src, schema, table, "")
	if err != nil {
		return 0, err
	}
	if err := cs.apply(ctx, tx); err != nil {
		return 0, err
	}
	var n int64
	err = pgx.BeginTxFunc(ctx, src, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(stx pgx.Tx) error {
		if err := cs.apply(ctx, stx); err != nil {
			return err
		}
		n, err = pipeCopy(ctx, stx.Conn().PgConn(), tx.Conn().PgConn(), cs.out, cs.in, counter)
		return err
	})
	return n, err
}

package rebalance

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// A move copies rows into tables that carry neither the shard's foreign
// keys nor its user triggers; both are made on the target after the rows
// are in, as the source defines them (as the deferred indexes are,
// copy_snapshot.go):
//   - a foreign key checked row by row while the tables fill in name order
//     fails on a child copied before its parent, and TRUNCATE of a parent
//     alone is refused; added after the copy it checks the copied rows
//     once, whole;
//   - a user trigger on the target would fire for the mover's TRUNCATE
//     and COPY, running another role's function as the mover (issue 27,
//     item 2); created after them, it fires for the shard's writers, as on
//     the source, in the source's enabled state (ENABLE, DISABLE, ENABLE
//     REPLICA, ENABLE ALWAYS), so that the apply worker fires on the target
//     what the source's replicas would. session_replication_role, which
//     would silence them too, needs a superuser: a non-superuser's move
//     could not use it.
//
// Before the mover empties the target's tables (buildTarget, and each
// copy, which may redo an earlier attempt's), they are dropped there;
// after the copy they are created when missing. The toolkit's own
// triggers (the fence, the change log) are not the shard's.

// foreignKey is a foreign key of the shard, as the source defines it.
type foreignKey struct {
	table, name string
	def         string // pg_get_constraintdef, names qualified
}

// userTrigger is a trigger of the shard, as the source defines it.
type userTrigger struct {
	table, name string
	def         string // pg_get_triggerdef, names qualified
	enabled     string // pg_trigger.tgenabled: O, D, R or A
	comment     *string
}

// deferredObjects are the shard's foreign keys and user triggers.
type deferredObjects struct {
	schema   string
	fks      []foreignKey
	triggers []userTrigger
}

// readDeferred reads the foreign keys and user triggers of schema's
// tables on the source: those of the tables themselves, not the copies
// PostgreSQL makes of a partitioned table's on its partitions (made again
// with the parent's), nor the internal triggers that enforce constraints.
// Definitions are read with only pg_catalog on the search path, so that
// every name in them is qualified.
func readDeferred(ctx context.Context, src *pgxpool.Pool, schema string) (*deferredObjects, error) {
	d := &deferredObjects{schema: schema}
	skip := []string{migrate.VersionTable, migrate.FailureTable}
	err := pgx.BeginFunc(ctx, src, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog, pg_temp`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT c.relname, k.conname, pg_catalog.pg_get_constraintdef(k.oid)
			FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname <> ALL($2) AND k.contype = 'f' AND k.conparentid = 0
			ORDER BY c.relname COLLATE "C", k.conname COLLATE "C"`, schema, skip)
		if err != nil {
			return err
		}
		if d.fks, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (foreignKey, error) {
			var k foreignKey
			err := row.Scan(&k.table, &k.name, &k.def)
			return k, err
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT c.relname, t.tgname, pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled::text,
				pg_catalog.obj_description(t.oid, 'pg_trigger')
			FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname <> ALL($2) AND NOT t.tgisinternal AND t.tgparentid = 0 AND t.tgname <> ALL($3)
			ORDER BY c.relname COLLATE "C", t.tgname COLLATE "C"`, schema, skip, []string{fence.Name, deltaTrigger, deltaTruncate})
		if err != nil {
			return err
		}
		d.triggers, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (userTrigger, error) {
			var tr userTrigger
			err := row.Scan(&tr.table, &tr.name, &tr.def, &tr.enabled, &tr.comment)
			return tr, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the shard's foreign keys and triggers: %w", err)
	}
	return d, nil
}

func (d *deferredObjects) qtable(table string) string {
	return pgx.Identifier{d.schema, table}.Sanitize()
}

// drop removes the foreign keys and user triggers from the target's
// tables, in tx (which then empties them).
func (d *deferredObjects) drop(ctx context.Context, tx pg.Execer) error {
	for _, k := range d.fks {
		if _, err := tx.Exec(ctx, `ALTER TABLE `+d.qtable(k.table)+` DROP CONSTRAINT IF EXISTS `+pgx.Identifier{k.name}.Sanitize()); err != nil {
			return fmt.Errorf("%s: drop foreign key %s until the rows are in: %w", d.qtable(k.table), k.name, err)
		}
	}
	for _, tr := range d.triggers {
		if _, err := tx.Exec(ctx, `DROP TRIGGER IF EXISTS `+pgx.Identifier{tr.name}.Sanitize()+` ON `+d.qtable(tr.table)); err != nil {
			return fmt.Errorf("%s: drop trigger %s until the rows are in: %w", d.qtable(tr.table), tr.name, err)
		}
	}
	return nil
}

// create makes on the target the foreign keys and triggers it lacks,
// after the copy: each foreign key checks the copied rows as it is added;
// each trigger gets the source's enabled state.
func (d *deferredObjects) create(ctx context.Context, dst pg.Execer) error {
	for _, k := range d.fks {
		var has bool
		if err := dst.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`,
			d.qtable(k.table), k.name).Scan(&has); err != nil {
			return err
		}
		if has {
			continue
		}
		if _, err := dst.Exec(ctx, `ALTER TABLE `+d.qtable(k.table)+` ADD CONSTRAINT `+pgx.Identifier{k.name}.Sanitize()+` `+k.def); err != nil {
			return fmt.Errorf("%s: foreign key %s: %w", d.qtable(k.table), k.name, err)
		}
	}
	for _, tr := range d.triggers {
		var has bool
		if err := dst.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_trigger WHERE tgrelid = $1::regclass AND tgname = $2)`,
			d.qtable(tr.table), tr.name).Scan(&has); err != nil {
			return err
		}
		if has {
			continue
		}
		if _, err := dst.Exec(ctx, tr.def); err != nil {
			return fmt.Errorf("%s: trigger %s: %w", d.qtable(tr.table), tr.name, err)
		}
		var then []string
		if state := map[string]string{"D": "DISABLE", "R": "ENABLE REPLICA", "A": "ENABLE ALWAYS"}[tr.enabled]; state != "" { // O: as CREATE TRIGGER leaves it
			then = append(then, `ALTER TABLE `+d.qtable(tr.table)+` `+state+` TRIGGER `+pgx.Identifier{tr.name}.Sanitize())
		}
		if tr.comment != nil {
			then = append(then, `COMMENT ON TRIGGER `+pgx.Identifier{tr.name}.Sanitize()+` ON `+d.qtable(tr.table)+` IS `+pg.QuoteLiteral(*tr.comment))
		}
		for _, sql := range then {
			if _, err := dst.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%s: trigger %s: %w", d.qtable(tr.table), tr.name, err)
			}
		}
	}
	return nil
}

package rebalance

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// A shard's partitioned tables move whole. A partitioned table holds no
// rows itself: its leaves (the partitions that are not partitioned in
// turn) do. So a move copies, publishes, logs changes of and checksums the
// tables that hold rows (rowTables: the ordinary tables and the leaves),
// each on its own and FROM ONLY it, while the fence goes on every table of
// the schema, parents and partitions alike (fence.ShardTables), since a
// write may name a partition directly.
//
// The publication lists the leaves themselves, not the parents: changes
// are then published, applied, logged and counted per leaf, as the copy
// made them, and the publication's members are exactly what a move adds
// and takes out again (publish_via_partition_root would publish the
// parent and route every change through the target's tree instead, and
// its members would no longer be the tables the copy and the checks
// name). PostgreSQL requires a replica identity of each leaf, which the
// preflight checks leaf by leaf.
//
// The copy builds no index of a partition tree after the rows are in:
// rebuilding a partitioned index means an invalid index ON ONLY each
// parent, one per leaf, and an ATTACH per level (a primary key the same
// way, constraint by constraint), with a resumed move finding any
// half-done mix of those; the leaves' indexes are kept while the rows go
// in instead (see deferredIndexes).
//
// What a move cannot carry is refused before anything changes
// (movableChecks, in the preflight) and again before the copy: a foreign
// table, whose rows live elsewhere; a table of the shard whose partitions
// or inheritance children lie in another schema, or the other way round,
// whose rows would be left behind or copied twice.

// rowTables are the shard's tables that hold rows, in name order:
// ordinary tables and the leaves of partitioned ones, without the
// migration bookkeeping. It refuses a schema with tables a move cannot
// carry (ErrUnmovable).
func rowTables(ctx context.Context, q shardmgr.Querier, schema string) ([]string, error) {
	bad, err := unmovableTables(ctx, q, []string{schema})
	if err != nil {
		return nil, err
	}
	if len(bad[schema]) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnmovable, strings.Join(bad[schema], "; "))
	}
	rows, err := q.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname <> ALL($2)
		ORDER BY c.relname COLLATE "C"`, schema, []string{migrate.VersionTable, migrate.FailureTable})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// unmovableTables lists, per schema of schemas, what a move of that
// schema cannot carry, each as a phrase naming the table and why.
func unmovableTables(ctx context.Context, q shardmgr.Querier, schemas []string) (map[string][]string, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, pg_catalog.format('%I.%I is a foreign table (its rows live on another server)', n.nspname, c.relname)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind = 'f'
		UNION ALL
		SELECT cn.nspname, pg_catalog.format('%I.%I is a %s of %I.%I, outside the shard''s schema', cn.nspname, c.relname,
				CASE WHEN c.relispartition THEN 'partition' ELSE 'child table' END, pn.nspname, p.relname)
		FROM pg_catalog.pg_inherits i
		JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid JOIN pg_catalog.pg_namespace cn ON cn.oid = c.relnamespace
		JOIN pg_catalog.pg_class p ON p.oid = i.inhparent JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
		WHERE cn.nspname = ANY($1) AND pn.nspname <> cn.nspname AND c.relkind IN ('r', 'p', 'f')
		UNION ALL
		SELECT pn.nspname, pg_catalog.format('%I.%I has %s %I.%I outside the shard''s schema', pn.nspname, p.relname,
				CASE WHEN c.relispartition THEN 'partition' ELSE 'child table' END, cn.nspname, c.relname)
		FROM pg_catalog.pg_inherits i
		JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid JOIN pg_catalog.pg_namespace cn ON cn.oid = c.relnamespace
		JOIN pg_catalog.pg_class p ON p.oid = i.inhparent JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
		WHERE pn.nspname = ANY($1) AND pn.nspname <> cn.nspname AND p.relkind IN ('r', 'p', 'f')
		ORDER BY 1, 2`, schemas)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	var schema, what string
	_, err = pgx.ForEachRow(rows, []any{&schema, &what}, func() error {
		out[schema] = append(out[schema], what)
		return nil
	})
	return out, err
}

// movableChecks checks, on each source, that the moves' shards hold only
// what a move can carry, whatever their mode. Only a failed check is
// returned (one per source): a passing one would add a line to every
// plan.
func movableChecks(ctx context.Context, poolOf func(context.Context, string) (*pgxpool.Pool, error), moves []preflightMove) ([]Check, error) {
	schemasOn := map[string][]string{}
	shardOf := map[string]map[string]int{}
	var sources []string
	for _, m := range moves {
		if _, ok := schemasOn[m.From]; !ok {
			sources = append(sources, m.From)
			shardOf[m.From] = map[string]int{}
		}
		schemasOn[m.From] = append(schemasOn[m.From], m.Schema)
		shardOf[m.From][m.Schema] = m.Shard
	}
	var checks []Check
	for _, h := range sources {
		db, err := poolOf(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("preflight: host %s: %w", h, err)
		}
		bad, err := unmovableTables(ctx, db, schemasOn[h])
		if err != nil {
			return nil, fmt.Errorf("preflight: host %s: %w", h, err)
		}
		if len(bad) == 0 {
			continue
		}
		var shards []int
		var what []string
		for schema, w := range bad {
			shards = append(shards, shardOf[h][schema])
			what = append(what, w...)
		}
		sort.Ints(shards)
		sort.Strings(what)
		checks = append(checks, Check{Host: h, Role: RoleSource, Setting: CheckMovable,
			Value: "not movable: " + strings.Join(what, "; "),
			Need:  "only tables whose rows and partitions are in the shard's schema (no foreign tables)", Shards: shards})
	}
	return checks, nil
}

// sameKeys checks, before the flip, that the target's copy has every index
// of the source's that backs a primary key, unique or exclusion
// constraint, by name, and no index left invalid: an index of a partition
// tree that a move stopped half-way through rebuilding (as moves before
// partitioned tables moved whole did: the parent's ON ONLY index, never
// attached) would otherwise be flipped to, and a table without its key
// takes duplicates and cannot follow changes.
func sameKeys(ctx context.Context, src, dst shardmgr.Querier, schema string) error {
	const q = `SELECT ic.relname, i.indisvalid, EXISTS (SELECT FROM pg_catalog.pg_constraint k WHERE k.conindid = i.indexrelid
			AND k.conrelid = i.indrelid AND k.contype IN ('p', 'u', 'x'))
		FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
		JOIN pg_catalog.pg_class c ON c.oid = i.indrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname <> ALL($2)`
	type index struct{ valid, key bool }
	read := func(db shardmgr.Querier) (map[string]index, error) {
		rows, err := db.Query(ctx, q, schema, []string{migrate.VersionTable, migrate.FailureTable})
		if err != nil {
			return nil, err
		}
		out := map[string]index{}
		var name string
		var ix index
		_, err = pgx.ForEachRow(rows, []any{&name, &ix.valid, &ix.key}, func() error { out[name] = ix; return nil })
		return out, err
	}
	have, err := read(src)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	got, err := read(dst)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	var bad []string
	for name, ix := range got {
		if !ix.valid {
			bad = append(bad, name+" is not valid")
		}
	}
	for name, ix := range have {
		if _, ok := got[name]; ix.key && !ok {
			bad = append(bad, name+" is missing")
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%w: the target's indexes: %s (abort the move and run it again)", ErrMoveCheck, strings.Join(bad, ", "))
	}
	return nil
}

// samePartitions checks, before the flip, that the shard's partition
// trees are the same on both hosts: each partition attached to the same
// parent with the same bounds. A partition detached (or attached) on the
// source while an online move followed it stays as it was on the target,
// as logical replication carries no DDL, and its rows would show through
// the wrong parent after the flip.
func samePartitions(ctx context.Context, src, dst shardmgr.Querier, schema string) error {
	read := func(db shardmgr.Querier) (map[string]string, error) {
		rows, err := db.Query(ctx, `SELECT pg_catalog.format('%I.%I', n.nspname, c.relname),
				pg_catalog.format('%I.%I', pn.nspname, p.relname) || ' ' || pg_catalog.pg_get_expr(c.relpartbound, c.oid)
			FROM pg_catalog.pg_inherits i
			JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_catalog.pg_class p ON p.oid = i.inhparent JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
			WHERE n.nspname = $1 AND c.relispartition AND c.relkind IN ('r', 'p', 'f')`, schema)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		var child, parent string
		_, err = pgx.ForEachRow(rows, []any{&child, &parent}, func() error { out[child] = parent; return nil })
		return out, err
	}
	have, err := read(src)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	got, err := read(dst)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	var bad []string
	for child, p := range got {
		if q, ok := have[child]; !ok {
			bad = append(bad, fmt.Sprintf("%s is a partition of %s on the target, not on the source (detached there during the move?)", child, p))
		} else if q != p {
			bad = append(bad, fmt.Sprintf("%s is a partition of %s on the target, of %s on the source", child, p, q))
		}
	}
	for child, p := range have {
		if _, ok := got[child]; !ok {
			bad = append(bad, fmt.Sprintf("%s is a partition of %s on the source, not on the target (attached there during the move?)", child, p))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%w: the partition trees differ: %s (abort the move and run it again)", ErrMoveCheck, strings.Join(bad, "; "))
	}
	return nil
}

package rebalance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

// The schema checks of the preflight: a move builds the shard on its
// target from the migrations, up to the source's version, and then
// refuses a source whose tables differ from what they made. Both are
// known before anything is journaled, so the preflight asks them first,
// for offline moves too: a move that would fail in its schema phase is
// refused before it starts, with the tables named.

// Settings of the schema checks (Check.Setting).
const (
	// CheckMigrations: a shard migrated above version 0 is built on its
	// target from the migrations, which must be given and reach its
	// version.
	CheckMigrations = "migrations"
	// CheckShardTables: every table of a moving shard is one its
	// migrations make (a table made by hand, or another tool's version
	// table, has no place on the target).
	CheckShardTables = "shard tables"
)

// golangMigrateTable is the version table golang-migrate's CLI makes
// (x-migrations-table), which shardid does not read: a shard's version is
// in schema_version.
const golangMigrateTable = "schema_migrations"

// schemaMove is a move whose target the preflight's schema checks look
// at: planned, or journaled and not yet past its schema phase.
type schemaMove struct {
	Shard    int
	From, To string
	Schema   string
}

// schemaFacts is what one move's source holds, and what its migrations
// would make on the target.
type schemaFacts struct {
	move    schemaMove
	version int
	// extra are the source's tables the migrations do not make; missing
	// the ones they make that the source lacks; golangMigrate is set when
	// an extra table is golang-migrate's version table.
	extra, missing []string
	golangMigrate  bool
}

// schemaMoves are the moves of planned and open whose target is still to
// be built.
func schemaMoves(m *shardmgr.ShardMap, planned []PlannedMove, open []*MoveRecord) []schemaMove {
	var out []schemaMove
	for _, r := range open {
		if r.Phase == PhasePlanned {
			out = append(out, schemaMove{Shard: r.Shard, From: r.From, To: r.To, Schema: r.Schema})
		}
	}
	for _, p := range planned {
		out = append(out, schemaMove{Shard: p.Shard, From: p.From, To: p.To, Schema: m.Shards[p.Shard].Schema})
	}
	return out
}

// schemaChecks checks, per source host, that the migrations set (nil:
// none given) can build each moving shard on its target and make every
// table the source has. It reads the source's version and tables, and
// runs the migrations up to that version in a scratch schema of the
// source's database, in a transaction it rolls back.
func schemaChecks(ctx context.Context, m *shardmgr.ShardMap, poolOf func(context.Context, string) (*pgxpool.Pool, error), moves []schemaMove, set *migrate.MigrationSet) ([]Check, error) {
	if len(moves) == 0 {
		return nil, nil
	}
	facts := make([]schemaFacts, len(moves))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, mv := range moves {
		g.Go(func() error {
			f, err := readSchemaFacts(gctx, m, poolOf, mv, set)
			if err != nil {
				return fmt.Errorf("preflight: shard %d on %s: %w", mv.Shard, mv.From, err)
			}
			mu.Lock()
			facts[i] = f
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return schemaCheckResults(facts, set), nil
}

// schemaCheckResults turns the facts into checks: per source host one
// migrations check (when a shard there was migrated) and one tables check.
func schemaCheckResults(facts []schemaFacts, set *migrate.MigrationSet) []Check {
	var sources []string
	bySource := map[string][]schemaFacts{}
	for _, f := range facts {
		if _, ok := bySource[f.move.From]; !ok {
			sources = append(sources, f.move.From)
		}
		bySource[f.move.From] = append(bySource[f.move.From], f)
	}
	var checks []Check
	for _, h := range sources {
		var all, migrated, behind []int
		top := 0
		for _, f := range bySource[h] {
			all = append(all, f.move.Shard)
			if f.version > 0 {
				migrated = append(migrated, f.move.Shard)
				top = max(top, f.version)
				if set != nil && f.version > set.Latest() {
					behind = append(behind, f.move.Shard)
				}
			}
		}
		if len(migrated) > 0 {
			c := Check{Host: h, Role: RoleSource, Setting: CheckMigrations, Shards: migrated, OK: true,
				Need: fmt.Sprintf("the migrations up to version %d, to build the shards on their targets", top)}
			switch {
			case set == nil:
				c.Value, c.OK = "not given", false
				c.Fix = &Fix{Migrations: true}
			case len(behind) > 0:
				c.Value, c.OK, c.Shards = fmt.Sprintf("%d migrations, the shards are at version %d", set.Latest(), top), false, behind
				c.Fix = &Fix{Migrations: true}
			default:
				c.Value = fmt.Sprintf("%d migrations", set.Latest())
			}
			checks = append(checks, c)
		}
		c := Check{Host: h, Role: RoleSource, Setting: CheckShardTables, Value: "made by the migrations", OK: true, Shards: all,
			Need: "only tables the migrations make (the move builds the target from them)"}
		var bad []int
		var problems, drops []string
		for _, f := range bySource[h] {
			if len(f.extra) == 0 && len(f.missing) == 0 {
				continue
			}
			bad = append(bad, f.move.Shard)
			for _, t := range f.extra {
				qt := pgx.Identifier{f.move.Schema, t}.Sanitize()
				if t == golangMigrateTable && f.golangMigrate {
					problems = append(problems, qt+" is golang-migrate's version table (shardid's is schema_version)")
					drops = append(drops, "DROP TABLE "+qt)
					continue
				}
				problems = append(problems, qt+" was not made by the migrations")
			}
			for _, t := range f.missing {
				problems = append(problems, fmt.Sprintf("the migrations make %s, which the source lacks", pgx.Identifier{f.move.Schema, t}.Sanitize()))
			}
		}
		if len(bad) > 0 {
			c.OK, c.Shards, c.Value = false, bad, strings.Join(problems, "; ")
			c.Fix = &Fix{SQL: strings.Join(drops, "; ")}
			if len(drops) < len(problems) {
				c.Fix.Tables = true
			}
		}
		checks = append(checks, c)
	}
	return checks
}

// readSchemaFacts reads one move's source: its migration version and
// tables, against the tables set makes up to that version (none at
// version 0; unknown, so not compared, when set is nil above version 0).
func readSchemaFacts(ctx context.Context, m *shardmgr.ShardMap, poolOf func(context.Context, string) (*pgxpool.Pool, error), mv schemaMove, set *migrate.MigrationSet) (schemaFacts, error) {
	f := schemaFacts{move: mv}
	src, err := poolOf(ctx, mv.From)
	if err != nil {
		return f, err
	}
	version, _, err := migrate.ReadShardVersion(ctx, src, mv.Schema)
	if err != nil {
		// A missing schema or a failed migration is the move's own
		// check, with its own error; the preflight leaves it there.
		return f, nil
	}
	f.version = version
	if version > 0 && (set == nil || version > set.Latest()) {
		return f, nil
	}
	have, err := dataTables(ctx, src, mv.Schema)
	if err != nil {
		return f, err
	}
	var made []string
	if version > 0 {
		made, err = tablesMigrationsMake(ctx, src, m, mv, set, version)
		if errors.Is(err, errNoTxMigration) {
			return f, nil // cannot be tried in a transaction; the move checks
		}
		if err != nil {
			return f, fmt.Errorf("build the migrations up to version %d in a scratch schema: %w", version, err)
		}
	}
	for _, t := range have {
		if !slices.Contains(made, t) {
			f.extra = append(f.extra, t)
		}
	}
	for _, t := range made {
		if !slices.Contains(have, t) {
			f.missing = append(f.missing, t)
		}
	}
	if slices.Contains(f.extra, golangMigrateTable) {
		f.golangMigrate, err = isGolangMigrateTable(ctx, src, mv.Schema)
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

var errNoTxMigration = errors.New("a migration runs outside a transaction")

// tablesMigrationsMake runs set's migrations for shard mv.Shard up to
// version in a scratch schema of db, in a transaction that is rolled back
// (with the shard's generator there, as its migrations expect), and
// returns the tables they made, as dataTables names them.
func tablesMigrationsMake(ctx context.Context, db *pgxpool.Pool, m *shardmgr.ShardMap, mv schemaMove, set *migrate.MigrationSet, version int) ([]string, error) {
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	scratch := "shardid_preflight_" + hex.EncodeToString(suffix)
	migs, err := set.Render(mv.Shard, scratch)
	if err != nil {
		return nil, err
	}
	for _, mig := range migs[:version] {
		if mig.UpNoTx {
			return nil, errNoTxMigration
		}
	}
	params := catalog.GeneratorParams(m, mv.Shard)
	params.Schema = scratch
	ddl, err := shsql.Render(params)
	if err != nil {
		return nil, err
	}
	var made []string
	errRollback := errors.New("rollback")
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// Bounded: a migration that waits for a lock on an object outside
		// the shard must not hold the preflight.
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config('lock_timeout', '10s', true), pg_catalog.set_config('statement_timeout', '2min', true)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{scratch}.Sanitize()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("install the generator: %w", err)
		}
		for _, mig := range migs[:version] {
			if _, err := tx.Exec(ctx, mig.Up, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("%s: %w", mig.Name, err)
			}
		}
		if made, err = dataTables(ctx, tx, scratch); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return made, nil
	}
	return nil, err
}

// isGolangMigrateTable tells whether schema's schema_migrations is
// golang-migrate's version table: a bigint version and a boolean dirty.
func isGolangMigrateTable(ctx context.Context, q shardmgr.Querier, schema string) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
		  AND ((a.attname = 'version' AND a.atttypid = 'bigint'::regtype) OR (a.attname = 'dirty' AND a.atttypid = 'boolean'::regtype))`,
		pgx.Identifier{schema, golangMigrateTable}.Sanitize()).Scan(&n)
	return n == 2, err
}

// schemaErrors are the sentinels a failed schema check wraps.
func schemaErrors(failed []Check) []error {
	var out []error
	for _, c := range failed {
		if c.Setting == CheckMigrations {
			out = append(out, ErrMigrationsNeeded)
		}
		if c.Setting == CheckShardTables {
			out = append(out, ErrShardTables)
		}
	}
	return out
}

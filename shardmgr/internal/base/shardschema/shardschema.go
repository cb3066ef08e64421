package shardschema

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	shsql "github.com/shardid/shardid/sql"
)

// ToolkitSchema is the schema of the toolkit's own tables on every host
// and in the catalog database (migrations.Schema; a test holds them equal).
const ToolkitSchema = "shardid"

// Tables a migrated shard keeps in its own schema.
const (
	// VersionTable is tern's version table, <schema>.schema_version
	// (version int4 not null, one row), so the plain tern CLI agrees on
	// the version: tern migrate --version-table shard_0005.schema_version.
	VersionTable = "schema_version"
	// FailureTable holds at most one row: the last migration that failed
	// on the shard, or a disable-tx migration that is running or was
	// interrupted. A successful step removes it.
	FailureTable = "schema_version_failure"
)

// IDColumn is a column whose DEFAULT calls a shard's next_id().
type IDColumn struct {
	// Schema is the generator's schema: the shard the column's ids
	// belong to.
	Schema string
	// Table (regclass text) and Column are quoted for SQL.
	Table, Column string
	// Partitioned is true for a partitioned parent (relkind p), whose
	// rows live in its partitions.
	Partitioned bool
	// Partition is true for a partition (of any level): its rows are also
	// its parents'.
	Partition bool
}

func (c IDColumn) String() string { return c.Table + "." + c.Column }

// From is the column's table as a query's FROM reads its rows: a
// partitioned table with every partition's (whether or not a partition
// has the column's DEFAULT: one attached to the tree may not), any other
// table ONLY itself (an inheritance child has its own column).
func (c IDColumn) From() string {
	if c.Partitioned {
		return c.Table
	}
	return "ONLY " + c.Table
}

// IDColumns lists the columns whose DEFAULT calls the next_id() of
// schema (every schema's when schema is ""), in the order of schema,
// table, column.
func IDColumns(ctx context.Context, q pg.Querier, schema string) ([]IDColumn, error) {
	rows, err := q.Query(ctx, `SELECT gn.nspname, c.oid::pg_catalog.regclass::text, pg_catalog.quote_ident(a.attname), c.relkind = 'p', c.relispartition
		FROM pg_catalog.pg_depend d
		JOIN pg_catalog.pg_attrdef ad ON d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass AND d.objid = ad.oid
		JOIN pg_catalog.pg_class c ON c.oid = ad.adrelid AND c.relkind IN ('r', 'p')
		JOIN pg_catalog.pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum AND NOT a.attisdropped
		JOIN pg_catalog.pg_proc p ON d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.refobjid = p.oid
		JOIN pg_catalog.pg_namespace gn ON gn.oid = p.pronamespace
		WHERE p.proname = 'next_id' AND p.pronargs = 0 AND ($1 = '' OR gn.nspname = $1)
		ORDER BY 1, 2, 3`, schema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (IDColumn, error) {
		var c IDColumn
		return c, r.Scan(&c.Schema, &c.Table, &c.Column, &c.Partitioned, &c.Partition)
	})
}

// MaxID is the largest id stored in column c (nil when it holds none).
func MaxID(ctx context.Context, q pg.Querier, c IDColumn) (*int64, error) {
	var m *int64
	err := q.QueryRow(ctx, fmt.Sprintf(`SELECT max(%s)::bigint FROM %s`, c.Column, c.From())).Scan(&m)
	return m, err
}

// ShardOf returns the logical shard an id carries (-1 for a negative id,
// which no generator makes).
func ShardOf(l idgen.Layout, id int64) int {
	p, err := l.Decompose(idgen.ID(id))
	if err != nil {
		return -1
	}
	return int(p.Shard)
}

// UnixMilli returns the time an id carries, in ms since the Unix epoch.
func UnixMilli(l idgen.Layout, id int64) int64 {
	p, err := l.Decompose(idgen.ID(id))
	if err != nil {
		return 0
	}
	return p.Time.UnixMilli()
}

// IDOfCounter is the id the safe generator derives from counter value c:
// the counter's time and sequence parts with the shard bits between them.
func IDOfCounter(l idgen.Layout, c int64, shard int) int64 {
	l = l.Resolved()
	seqMask := int64(1)<<l.SeqBits - 1
	return (c>>l.SeqBits)<<(l.ShardBits+l.SeqBits) | int64(shard)<<l.SeqBits | (c & seqMask)
}

// ReadMarkers returns the marker comment of every next_id() generator on
// a host, by schema ("" when it has no comment).
func ReadMarkers(ctx context.Context, q pg.Querier) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '')
		FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = 'next_id' AND p.pronargs = 0`)
	if err != nil {
		return nil, fmt.Errorf("read generators: %w", err)
	}
	out := map[string]string{}
	var schema, comment string
	_, err = pgx.ForEachRow(rows, []any{&schema, &comment}, func() error {
		out[schema] = comment
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read generators: %w", err)
	}
	return out, nil
}

// RecordLocalShard records in the host's shardid.local_shards that it
// holds shard in schema, in state, as of catalog generation gen.
func RecordLocalShard(ctx context.Context, q pg.Execer, shard int, schema, state string, gen int64) error {
	_, err := q.Exec(ctx, `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES ($1, $2, $3, $4)
		ON CONFLICT (shard) DO UPDATE SET schema_name = EXCLUDED.schema_name, state = EXCLUDED.state, generation = EXCLUDED.generation`,
		shard, schema, state, gen)
	return err
}

// GeneratorLockWait is the error of a wait that began at start for shard's
// generator lock on db (or a lock of the counter) and ran out, naming the
// sessions holding the generator's lock.
func GeneratorLockWait(ctx context.Context, db pg.Querier, shard int, start time.Time) error {
	return pg.LockWaitFailed(ctx, fmt.Sprintf("shard %d's generator lock (advisory lock %d, %d) or its counter", shard, shsql.LockClass, shard), start,
		func(ctx context.Context) ([]pg.LockHolder, error) {
			return pg.AdvisoryHolders(ctx, db, int64(shsql.LockClass), int64(shard))
		})
}

// CheckTrusted refuses (an error wrapping pgtrust.ErrUntrusted) any of
// the shard schemas that the toolkit's role did not make: one owned by
// another role (a role that owns a shard's schema can drop and replace its
// counter), or whose version tables another role owns or put a trigger
// on (the next migration would run it as the migrating role). The
// application's own tables in a shard schema are not checked, nor the
// generator's objects: its install SQL refuses those of another owner
// itself, shard by shard (sql/templates/owners.sql.tmpl). Missing schemas
// pass.
func CheckTrusted(ctx context.Context, q pgtrust.Querier, schemas ...string) error {
	return pgtrust.CheckNamed(ctx, q, schemas, VersionTable, FailureTable)
}

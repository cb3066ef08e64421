package install

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// ShardDetail is what one logical shard holds on its host, for the
// operator console's shard panel:
//
//	{"shard":5,"schema":"shard_0005","host":"pg1","dsn":"...","state":"active","generation":N,
//	 "tables":[{"name":"likes","rows_estimate":N,"bytes":N}],
//	 "generator":{"variant":"safe","version":N},"counter":N,"next_id":"..."}
//
// The row counts are the planner's estimates (pg_class.reltuples), -1
// for a table never analysed; nothing is counted. Counter is the safe
// generator's counter position (the value its next call starts from),
// absent for another variant. Error says why the host could not be read;
// the catalog's part is filled in all the same.
type ShardDetail struct {
	ShardLocation
	Tables    []TableDetail    `json:"tables"`
	Generator *GeneratorDetail `json:"generator,omitempty"`
	Counter   *int64           `json:"counter,omitempty"`
	NextID    *int64           `json:"next_id,string,omitempty"`
	Error     string           `json:"error,omitempty"`
}

// TableDetail is one table of a shard's schema.
type TableDetail struct {
	Name         string `json:"name"`
	RowsEstimate int64  `json:"rows_estimate"`
	Bytes        int64  `json:"bytes"`
}

// GeneratorDetail is the shard's next_id() as its marker comment says.
type GeneratorDetail struct {
	Variant string `json:"variant"`
	Version int    `json:"version"`
}

// DescribeShard reads where shard lives (WhereIs) and, from its host, its
// tables with their estimated rows and sizes, its generator's variant and
// version and its counter's position. It only reads.
func DescribeShard(ctx context.Context, c *cluster.Cluster, shard int) (*ShardDetail, error) {
	loc, err := WhereIs(ctx, c, shard)
	if err != nil {
		return nil, err
	}
	d := &ShardDetail{ShardLocation: *loc, Tables: []TableDetail{}}
	if err := describeOnHost(ctx, c, d); err != nil {
		d.Error = pg.OneLine(err)
	}
	return d, nil
}

func describeOnHost(ctx context.Context, c *cluster.Cluster, d *ShardDetail) error {
	ctx, cancel := context.WithTimeout(ctx, hostProbeTimeout)
	defer cancel()
	conn, err := acquire(ctx, c, d.Host)
	if err != nil {
		return err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT c.relname, c.reltuples::bigint, pg_catalog.pg_total_relation_size(c.oid)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname`, d.Schema)
	if err != nil {
		return fmt.Errorf("read tables: %w", err)
	}
	d.Tables, err = pgx.CollectRows(rows, pgx.RowToStructByPos[TableDetail])
	if err != nil {
		return fmt.Errorf("read tables: %w", err)
	}
	markers, err := shardschema.ReadMarkers(ctx, conn)
	if err != nil {
		return err
	}
	if p, v, err := shsql.ParseMarker(markers[d.Schema]); err == nil {
		d.Generator = &GeneratorDetail{Variant: p.Variant, Version: v}
	}
	var exists bool
	seq := pgx.Identifier{d.Schema, shsql.CounterName}
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL`, seq.Sanitize()).Scan(&exists); err != nil {
		return fmt.Errorf("read counter: %w", err)
	}
	if !exists {
		return nil
	}
	var last int64
	var called bool
	if err := conn.QueryRow(ctx, `SELECT last_value, is_called FROM `+seq.Sanitize()).Scan(&last, &called); err != nil {
		return fmt.Errorf("read counter: %w", err)
	}
	if called {
		last++
	}
	d.Counter = &last
	if m, err := c.Map(ctx, shardmgr.UseRead); err == nil {
		id := shardschema.IDOfCounter(m.Layout, last, d.Shard)
		d.NextID = &id
	}
	return nil
}

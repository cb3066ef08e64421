package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	shsql "github.com/shardid/shardid/sql"
)

// State is a logical shard's state in the catalog.
type State string

// Shard states.
const (
	// StateActive: reads and writes go to the shard's host.
	StateActive State = "active"
	// StateReadOnly: reads only; the router refuses writes.
	StateReadOnly State = "read-only"
	// StateMoving: the shard is being copied to another host; the router
	// refuses writes until the move flips it back to active.
	StateMoving State = "moving"
)

// Valid reports whether s is one of the catalog states.
func (s State) Valid() bool {
	return s == StateActive || s == StateReadOnly || s == StateMoving
}

// CatalogHost is a host as the catalog records it.
type CatalogHost struct {
	Name  string
	DSN   string // as written in the cluster file, ${VAR}s unexpanded, without a password (Host.CatalogDSN)
	Drain bool
}

// Shard is one logical shard's place in the map at one generation: the
// same value in a ShardMap and from the Router.
type Shard struct {
	ID         int
	Schema     string
	Host       string
	State      State
	Generation int64 // catalog generation of the map it comes from
}

// Table returns the schema-qualified, quoted name of table name in the
// shard: `"shard_0005"."likes"`, the same as s.Ident(name).Sanitize(). To
// write a whole query, SQL is easier to read: s.SQL("SELECT ... FROM
// {likes}").
func (s Shard) Table(name string) string { return pgx.Identifier{s.Schema, name}.Sanitize() }

// NextID returns the SQL call of the shard's generator, `"shard_0005"."next_id"()`,
// for a column DEFAULT or an INSERT.
func (s Shard) NextID() string { return pgx.Identifier{s.Schema, shsql.FunctionName}.Sanitize() + "()" }

// ShardMap is the catalog at one generation: the cluster, its hosts and where
// each logical shard lives.
type ShardMap struct {
	Cluster    string
	Generation int64
	Layout     idgen.Layout
	Variant    string
	Hosts      []CatalogHost // sorted by name
	Shards     []Shard       // index = shard id
}

// Host returns the catalog's entry for host name.
func (m *ShardMap) Host(name string) (CatalogHost, bool) {
	i, ok := slices.BinarySearchFunc(m.Hosts, name, func(h CatalogHost, n string) int {
		switch {
		case h.Name < n:
			return -1
		case h.Name > n:
			return 1
		}
		return 0
	})
	if !ok {
		return CatalogHost{}, false
	}
	return m.Hosts[i], true
}

// ShardsOn returns the ids of the shards the map places on host, ascending.
func (m *ShardMap) ShardsOn(host string) []int {
	ids := []int{}
	for _, s := range m.Shards {
		if s.Host == host {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Querier is what ReadMap needs: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ReadMap reads the whole map from the catalog database. It returns an
// error wrapping ErrNotInitialized when the catalog holds no cluster.
func ReadMap(ctx context.Context, q Querier) (*ShardMap, error) {
	m := &ShardMap{}
	var n int
	err := q.QueryRow(ctx, `SELECT name, generation, epoch_ms, time_bits, shard_bits, seq_bits, variant, shards
		FROM shardid.cluster`).Scan(&m.Cluster, &m.Generation, &m.Layout.Epoch, &m.Layout.TimeBits,
		&m.Layout.ShardBits, &m.Layout.SeqBits, &m.Variant, &n)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err) {
			return nil, ErrNotInitialized
		}
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	rows, err := q.Query(ctx, `SELECT name, dsn, drain FROM shardid.hosts ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("read catalog hosts: %w", err)
	}
	m.Hosts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (CatalogHost, error) {
		var h CatalogHost
		return h, r.Scan(&h.Name, &h.DSN, &h.Drain)
	})
	if err != nil {
		return nil, fmt.Errorf("read catalog hosts: %w", err)
	}
	rows, err = q.Query(ctx, `SELECT id, schema_name, host, state FROM shardid.shards ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read catalog shards: %w", err)
	}
	shards, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Shard, error) {
		s := Shard{Generation: m.Generation}
		return s, r.Scan(&s.ID, &s.Schema, &s.Host, &s.State)
	})
	if err != nil {
		return nil, fmt.Errorf("read catalog shards: %w", err)
	}
	if len(shards) != n {
		return nil, fmt.Errorf("read catalog: cluster has %d shards but %d are placed", n, len(shards))
	}
	for i, s := range shards {
		if s.ID != i {
			return nil, fmt.Errorf("read catalog: shard %d is missing from the map", i)
		}
	}
	m.Shards = shards
	return m, nil
}

// catalogGeneration reads the catalog's current generation.
func catalogGeneration(ctx context.Context, q Querier) (int64, error) {
	var gen int64
	if err := q.QueryRow(ctx, `SELECT generation FROM shardid.cluster`).Scan(&gen); err != nil {
		if errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err) {
			return 0, ErrNotInitialized
		}
		return 0, fmt.Errorf("read catalog generation: %w", err)
	}
	return gen, nil
}

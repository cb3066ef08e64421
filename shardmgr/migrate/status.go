package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// MigrationStatus is every shard's version, as `shardid migrate status
// --json` prints it:
//
//	{"latest":N,"shards":[{"id":5,"host":"pg1","version":2}]}
//
// A shard with a recorded failure also carries "failure"; a shard whose
// version could not be read has version -1 and "error".
type MigrationStatus struct {
	// Latest is the number of migrations in the set.
	Latest int `json:"latest"`
	// Shards holds one entry per shard read, ascending by id.
	Shards []ShardVersion `json:"shards"`
}

// ShardVersion is one shard's migration state on its host.
type ShardVersion struct {
	// ID is the logical shard; Host the host that holds it.
	ID   int    `json:"id"`
	Host string `json:"host"`
	// Version is the shard's version: the number of migrations applied,
	// -1 when it could not be read.
	Version int `json:"version"`
	// Failure is the failure the shard recorded, nil when none.
	Failure *MigrationFailure `json:"failure,omitempty"`
	// Err is why the version could not be read (JSON: its message,
	// "error").
	Err error `json:"-"`
}

// MarshalJSON writes Err as its message under "error".
func (v ShardVersion) MarshalJSON() ([]byte, error) {
	type plain ShardVersion
	return json.Marshal(struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain(v), pg.ErrorText(v.Err)})
}

// MigrationFailure is the row of a shard's FailureTable: the last
// migration that failed there, or a disable-tx migration that is running
// or was interrupted.
type MigrationFailure struct {
	// Version is the version the shard is at: Migration did not finish.
	Version int `json:"version"`
	// Migration is the file that failed, Direction the half.
	Migration string    `json:"migration"`
	Direction Direction `json:"direction"`
	// State is "failed", "running" (a run holds the shard's lock) or
	// "interrupted" (a disable-tx migration stopped half way and no run
	// holds the lock).
	State string `json:"state"`
	// Partial: statements of the migration may have committed.
	Partial bool `json:"partial"`
	// SQLState and Message are as in MigrationError.
	SQLState string `json:"sqlstate,omitempty"`
	Message  string `json:"message"`
	// At is when the failure was recorded (the host's clock).
	At time.Time `json:"at"`
}

// MigrationSummary groups a status for people.
type MigrationSummary struct {
	// Latest is the number of migrations in the set.
	Latest int
	// AtVersion counts shards per version (readable shards only).
	AtVersion map[int]int
	// Behind lists shards below Latest; Ahead those above it (their
	// directory has more migrations than this one); Failed those with a
	// failure recorded; Unreadable those whose version could not be read.
	Behind, Ahead, Failed, Unreadable []int
}

// Summary groups the status by version and lists the shards that need
// attention.
func (s *MigrationStatus) Summary() MigrationSummary {
	sum := MigrationSummary{Latest: s.Latest, AtVersion: map[int]int{}}
	for _, sh := range s.Shards {
		switch {
		case sh.Version < 0:
			sum.Unreadable = append(sum.Unreadable, sh.ID)
			continue
		case sh.Version < s.Latest:
			sum.Behind = append(sum.Behind, sh.ID)
		case sh.Version > s.Latest:
			sum.Ahead = append(sum.Ahead, sh.ID)
		}
		sum.AtVersion[sh.Version]++
		if sh.Failure != nil {
			sum.Failed = append(sum.Failed, sh.ID)
		}
	}
	return sum
}

// Versions returns the versions present, ascending.
func (s MigrationSummary) Versions() []int {
	out := make([]int, 0, len(s.AtVersion))
	for v := range s.AtVersion {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

// ReadMigrationStatus reads every shard's version and recorded failure
// from its host, hosts in parallel. A host that cannot be read marks its
// shards unreadable rather than failing the whole status; the error is
// for the catalog and the cluster file.
func ReadMigrationStatus(ctx context.Context, c *cluster.Cluster, set *MigrationSet) (*MigrationStatus, error) {
	return ReadMigrationStatusOf(ctx, c, set, nil)
}

// ReadMigrationStatusOf is ReadMigrationStatus for some logical shards
// (nil: every shard); the status lists only those, ascending. A shard the
// cluster does not have is an error wrapping shardmgr.ErrUnknownShard.
func ReadMigrationStatusOf(ctx context.Context, c *cluster.Cluster, set *MigrationSet, ids []int) (*MigrationStatus, error) {
	m, err := c.Map(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	selected, err := selectShards(m, ids)
	if err != nil {
		return nil, err
	}
	hosts, err := hostsOf(c.Config(), selected)
	if err != nil {
		return nil, err
	}
	// at is where each selected shard's entry goes in st.Shards.
	at := make(map[int]int, len(selected))
	perHost := map[string][]int{}
	for i, s := range selected {
		at[s.ID] = i
		perHost[s.Host] = append(perHost[s.Host], s.ID)
	}
	st := &MigrationStatus{Latest: set.Latest(), Shards: make([]ShardVersion, len(selected))}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for name, h := range hosts {
		shards := perHost[name]
		g.Go(func() error {
			vs, err := hostVersions(gctx, c, h, m, shards)
			mu.Lock()
			defer mu.Unlock()
			for i, id := range shards {
				if err != nil {
					st.Shards[at[id]] = ShardVersion{ID: id, Host: name, Version: -1, Err: err}
				} else {
					st.Shards[at[id]] = vs[i]
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return st, nil
}

// hostVersions reads the versions of shards on h in a few queries: which
// schemas and tables exist, all version rows in one UNION, all failure
// rows in another, and which shards a run holds locked.
func hostVersions(ctx context.Context, c *cluster.Cluster, h shardmgr.Host, m *shardmgr.ShardMap, shards []int) ([]ShardVersion, error) {
	pool, err := c.HostPool(ctx, h.Name, cluster.Session{})
	if err != nil {
		return nil, err
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to host %s: %w", h.Name, err)
	}
	defer pc.Release()
	conn := pc.Conn()

	schemas := make([]string, len(shards))
	for i, id := range shards {
		schemas[i] = m.Shards[id].Schema
	}
	rows, err := conn.Query(ctx, `SELECT s.name, n.oid IS NOT NULL,
			EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relname = $2 AND c.relkind = 'r'),
			EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relname = $3 AND c.relkind = 'r')
		FROM unnest($1::text[]) AS s(name) LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = s.name`,
		schemas, VersionTable, FailureTable)
	if err != nil {
		return nil, pg.OnHost(h.Name, err)
	}
	type tables struct{ schema, vt, ft bool }
	have := map[string]tables{}
	var (
		name string
		t    tables
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &t.schema, &t.vt, &t.ft}, func() error {
		have[name] = t
		return nil
	}); err != nil {
		return nil, pg.OnHost(h.Name, err)
	}

	out := make([]ShardVersion, len(shards))
	var vq, fq []string
	for i, id := range shards {
		out[i] = ShardVersion{ID: id, Host: h.Name}
		t := have[schemas[i]]
		if !t.schema {
			out[i].Version, out[i].Err = -1, fmt.Errorf("%w: no schema %s on %s", ErrShardSchemaMissing, schemas[i], h.Name)
		}
		if t.vt {
			vq = append(vq, fmt.Sprintf("SELECT %d, version FROM %s", id, pgx.Identifier{schemas[i], VersionTable}.Sanitize()))
		}
		if t.ft {
			fq = append(fq, fmt.Sprintf("SELECT %d, version, migration, direction, state, partial, sqlstate, message, at FROM %s",
				id, pgx.Identifier{schemas[i], FailureTable}.Sanitize()))
		}
	}
	index := make(map[int]int, len(shards))
	for i, id := range shards {
		index[id] = i
	}
	seen := map[int]int{}
	for chunk := range slices.Chunk(vq, 500) {
		rows, err := conn.Query(ctx, strings.Join(chunk, " UNION ALL "))
		if err != nil {
			return nil, fmt.Errorf("host %s: read versions: %w", h.Name, err)
		}
		var id, v int
		if _, err := pgx.ForEachRow(rows, []any{&id, &v}, func() error {
			out[index[id]].Version = v
			seen[id]++
			return nil
		}); err != nil {
			return nil, fmt.Errorf("host %s: read versions: %w", h.Name, err)
		}
	}
	for id, n := range seen {
		if n != 1 {
			out[index[id]].Version, out[index[id]].Err = -1, fmt.Errorf("%s.%s has %d rows, want one", m.Shards[id].Schema, VersionTable, n)
		}
	}
	locked, err := lockedShards(ctx, conn)
	if err != nil {
		return nil, pg.OnHost(h.Name, err)
	}
	for chunk := range slices.Chunk(fq, 500) {
		rows, err := conn.Query(ctx, strings.Join(chunk, " UNION ALL "))
		if err != nil {
			return nil, fmt.Errorf("host %s: read failures: %w", h.Name, err)
		}
		var (
			id  int
			f   MigrationFailure
			dir string
		)
		if _, err := pgx.ForEachRow(rows, []any{&id, &f.Version, &f.Migration, &dir, &f.State, &f.Partial, &f.SQLState, &f.Message, &f.At}, func() error {
			f.Direction = Direction(dir)
			if f.State == "running" && !locked[id] {
				f.State = "interrupted"
			}
			ff := f
			out[index[id]].Failure = &ff
			return nil
		}); err != nil {
			return nil, fmt.Errorf("host %s: read failures: %w", h.Name, err)
		}
	}
	return out, nil
}

// lockedShards returns the shards whose migration lock some session holds
// in conn's database.
func lockedShards(ctx context.Context, conn *pgx.Conn) (map[int]bool, error) {
	rows, err := conn.Query(ctx, `SELECT objid::bigint FROM pg_catalog.pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid::bigint = $1
		  AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())`, int64(migrateLockClass))
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	out := make(map[int]bool, len(ids))
	for _, id := range ids {
		out[int(id)] = true
	}
	return out, nil
}

// ReadShardVersion reads the version and recorded failure of the shard
// in schema through q (0 and nil when it was never migrated). Moves use it
// to build a shard on a new host to the version of its old one.
func ReadShardVersion(ctx context.Context, q shardmgr.Querier, schema string) (int, *MigrationFailure, error) {
	vt, ft := pgx.Identifier{schema, VersionTable}.Sanitize(), pgx.Identifier{schema, FailureTable}.Sanitize()
	var hasVT, hasFT bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL`, vt, ft).Scan(&hasVT, &hasFT); err != nil {
		return 0, nil, err
	}
	var v int
	if hasVT {
		if err := q.QueryRow(ctx, `SELECT version FROM `+vt).Scan(&v); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, nil, err
		}
	}
	if !hasFT {
		return v, nil, nil
	}
	var (
		f   MigrationFailure
		dir string
	)
	err := q.QueryRow(ctx, `SELECT version, migration, direction, state, partial, sqlstate, message, at FROM `+ft).
		Scan(&f.Version, &f.Migration, &dir, &f.State, &f.Partial, &f.SQLState, &f.Message, &f.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	f.Direction = Direction(dir)
	return v, &f, nil
}

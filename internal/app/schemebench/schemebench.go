package schemebench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/migrations"
	shsql "github.com/shardid/shardid/sql"
)

// Options of a run. Zero values mean 1,000,000 rows, 3 rounds, 1 s per Go
// case and 2 goroutines.
type Options struct {
	Rows       int
	Rounds     int
	GoDuration time.Duration
	Goroutines int
	// Progress, when set, is called before each step: making the keys,
	// then each measurement of each round.
	Progress func(Step)
}

// Step is where a run stands: Done of Total steps finished, the next one
// being Case of Round (0 while the keys are made) of Rounds.
type Step struct {
	Round, Rounds int
	Case          string
	Done, Total   int
}

// Rate is one way of making ids, measured.
type Rate struct {
	Name   string          `json:"name"`
	How    string          `json:"how"`
	Median time.Duration   `json:"median_ns"`
	All    []time.Duration `json:"all_ns"`
	// IDs is how many ids each measurement made (the Go cases run for a
	// fixed time: there it is the median round's count).
	IDs       int64   `json:"ids"`
	IDsPerSec float64 `json:"ids_per_sec"`
	counts    []int64
}

// Table is one key type in a bulk insert: its time and its sizes.
type Table struct {
	Rate
	IndexBytes int64 `json:"index_bytes"`
	TableBytes int64 `json:"table_bytes"`
}

// Result of a run.
type Result struct {
	Server     string  `json:"server"`
	Rows       int     `json:"rows"`
	Rounds     int     `json:"rounds"`
	Goroutines int     `json:"goroutines"`
	InDB       []Rate  `json:"in_postgres"`
	InGo       []Rate  `json:"in_go"`
	Tables     []Table `json:"tables"`
}

const setupSQL = `
DROP SCHEMA IF EXISTS schemebench, shard_0001, shard_0002 CASCADE;
%s;
%s;
%s;
CREATE SEQUENCE schemebench.seq;
CREATE UNLOGGED TABLE schemebench.keys_bigint (id bigint, v int);
CREATE UNLOGGED TABLE schemebench.keys_uuidv7 (id uuid, v int);
CREATE UNLOGGED TABLE schemebench.keys_uuidv4 (id uuid, v int);
CREATE TABLE schemebench.t_serial (id bigserial PRIMARY KEY, v int);
CREATE TABLE schemebench.t_bigint (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), v int);
CREATE TABLE schemebench.t_uuidv7 (id uuid PRIMARY KEY DEFAULT schemebench.uuidv7(), v int);
CREATE TABLE schemebench.t_uuidv4 (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v int);
CREATE TABLE schemebench.p_bigint (id bigint PRIMARY KEY, v int);
CREATE TABLE schemebench.p_uuidv7 (id uuid PRIMARY KEY, v int);
CREATE TABLE schemebench.p_uuidv4 (id uuid PRIMARY KEY, v int);
`

// Run installs what it needs into schemas schemebench, shard_0001 and
// shard_0002 of the database at dsn (dropping them first: point it at a
// scratch database), with the segment and snowflake tables of package
// migrations, and measures.
func Run(ctx context.Context, dsn string, opts Options) (*Result, error) {
	if opts.Rows <= 0 {
		opts.Rows = 1_000_000
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 3
	}
	if opts.GoDuration <= 0 {
		opts.GoDuration = time.Second
	}
	if opts.Goroutines <= 0 {
		opts.Goroutines = 2
	}
	if opts.Progress == nil {
		opts.Progress = func(Step) {}
	}
	conn, err := pgsession.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// As in genbench: a generator lock held elsewhere in the database must
	// fail the bench, not hang it.
	if _, err := conn.Exec(ctx, `SET lock_timeout = '10s'; SET statement_timeout = '30min'`); err != nil {
		return nil, err
	}
	safe, err := shsql.Render(shsql.Params{Shard: 1})
	if err != nil {
		return nil, err
	}
	insta, err := shsql.Render(shsql.Params{Shard: 2, Variant: shsql.Instagram})
	if err != nil {
		return nil, err
	}
	v7, err := shsql.RenderUUIDv7("schemebench")
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(setupSQL, safe, insta, v7)); err != nil {
		return nil, fmt.Errorf("bench setup: %w", err)
	}
	res := &Result{Rows: opts.Rows, Rounds: opts.Rounds, Goroutines: opts.Goroutines}
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('server_version_num')::int").Scan(&res.Server, &version); err != nil {
		return nil, err
	}
	n := fmt.Sprint(opts.Rows)
	gen := func(expr string) string { return "SELECT count(" + expr + ") FROM generate_series(1, " + n + ")" }
	res.InDB = []Rate{
		{Name: "nextval (bigserial)", How: gen("nextval('schemebench.seq')")},
		{Name: "safe generator", How: gen("shard_0001.next_id()")},
		{Name: "instagram function", How: gen("shard_0002.next_id()")},
		{Name: "uuidv7() of shardid sql uuidv7", How: gen("schemebench.uuidv7()")},
		{Name: "gen_random_uuid()", How: gen("gen_random_uuid()")},
	}
	if version >= 180000 {
		res.InDB = append(res.InDB, Rate{Name: "uuidv7() built in (PostgreSQL 18)", How: gen("pg_catalog.uuidv7()")})
	}
	ins := func(table string) string {
		return "INSERT INTO schemebench." + table + " (v) SELECT g FROM generate_series(1, " + n + ") g"
	}
	copyKeys := func(kind string) string {
		return "INSERT INTO schemebench.p_" + kind + " SELECT id, v FROM schemebench.keys_" + kind
	}
	res.Tables = []Table{
		{Rate: Rate{Name: "bigserial", How: ins("t_serial")}},
		{Rate: Rate{Name: "time-ordered bigint (safe DEFAULT)", How: ins("t_bigint")}},
		{Rate: Rate{Name: "UUIDv7 (uuidv7() DEFAULT)", How: ins("t_uuidv7")}},
		{Rate: Rate{Name: "random UUIDv4 (gen_random_uuid() DEFAULT)", How: ins("t_uuidv4")}},
		{Rate: Rate{Name: "time-ordered bigint, keys made beforehand", How: copyKeys("bigint")}},
		{Rate: Rate{Name: "UUIDv7, keys made beforehand", How: copyKeys("uuidv7")}},
		{Rate: Rate{Name: "random UUIDv4, keys made beforehand", How: copyKeys("uuidv4")}},
	}
	// The keys made beforehand isolate what the key's order does to the
	// index from what making the key costs.
	goCases, closeGo, err := goCases(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer closeGo()
	step := Step{Rounds: opts.Rounds, Total: 1 + opts.Rounds*(len(res.InDB)+len(goCases)+len(res.Tables))}
	progress := func(round int, name string) {
		step.Round, step.Case = round, name
		opts.Progress(step)
		step.Done++
	}
	progress(0, "making keys")
	if _, err := conn.Exec(ctx, `
INSERT INTO schemebench.keys_bigint SELECT shard_0001.next_id(), g FROM generate_series(1, `+n+`) g;
INSERT INTO schemebench.keys_uuidv7 SELECT schemebench.uuidv7(), g FROM generate_series(1, `+n+`) g;
INSERT INTO schemebench.keys_uuidv4 SELECT gen_random_uuid(), g FROM generate_series(1, `+n+`) g;`); err != nil {
		return nil, fmt.Errorf("bench keys: %w", err)
	}

	for _, c := range goCases {
		res.InGo = append(res.InGo, Rate{Name: c.name, How: c.how})
	}

	for round := 1; round <= opts.Rounds; round++ {
		for i := range res.InDB {
			c := &res.InDB[i]
			progress(round, c.Name)
			d, err := timeExec(ctx, conn, c.How)
			if err != nil {
				return nil, fmt.Errorf("bench %s: %w", c.Name, err)
			}
			c.All = append(c.All, d)
			c.counts = append(c.counts, int64(opts.Rows))
		}
		for i, gc := range goCases {
			c := &res.InGo[i]
			progress(round, c.Name)
			count, d, err := runFor(opts.GoDuration, opts.Goroutines, gc.next)
			if err != nil {
				return nil, fmt.Errorf("bench %s: %w", c.Name, err)
			}
			c.All = append(c.All, d)
			c.counts = append(c.counts, count)
		}
		if _, err := conn.Exec(ctx, "TRUNCATE schemebench.t_serial, schemebench.t_bigint, schemebench.t_uuidv7, schemebench.t_uuidv4, schemebench.p_bigint, schemebench.p_uuidv7, schemebench.p_uuidv4; CHECKPOINT"); err != nil {
			return nil, err
		}
		for i := range res.Tables {
			c := &res.Tables[i]
			progress(round, "insert "+c.Name)
			d, err := timeExec(ctx, conn, c.How)
			if err != nil {
				return nil, fmt.Errorf("bench %s: %w", c.Name, err)
			}
			c.All = append(c.All, d)
			c.counts = append(c.counts, int64(opts.Rows))
		}
	}
	for i := range res.InDB {
		res.InDB[i].summarise()
	}
	for i := range res.InGo {
		res.InGo[i].summarise()
	}
	for i, table := range []string{"t_serial", "t_bigint", "t_uuidv7", "t_uuidv4", "p_bigint", "p_uuidv7", "p_uuidv4"} {
		c := &res.Tables[i]
		c.summarise()
		if err := conn.QueryRow(ctx, `SELECT pg_relation_size(('schemebench.'||$1||'_pkey')::regclass), pg_relation_size(('schemebench.'||$1)::regclass)`, table).
			Scan(&c.IndexBytes, &c.TableBytes); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func timeExec(ctx context.Context, conn *pgx.Conn, sql string) (time.Duration, error) {
	start := time.Now()
	_, err := conn.Exec(ctx, sql)
	return time.Since(start), err
}

// summarise takes the median round by rate (ids per second).
func (r *Rate) summarise() {
	idx := make([]int, len(r.All))
	for i := range idx {
		idx[i] = i
	}
	rate := func(i int) float64 { return float64(r.counts[i]) / r.All[i].Seconds() }
	slices.SortFunc(idx, func(a, b int) int {
		switch x, y := rate(a), rate(b); {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	m := idx[len(idx)/2]
	r.Median, r.IDs, r.IDsPerSec = r.All[m], r.counts[m], rate(m)
}

// goCase makes one id in Go.
type goCase struct {
	name, how string
	next      func() (int, error) // ids made
}

func goCases(ctx context.Context, dsn string) ([]goCase, func(), error) {
	twitter, err := snowflake.New(snowflake.Settings{Worker: 1})
	if err != nil {
		return nil, nil, err
	}
	batch, err := snowflake.New(snowflake.Settings{Worker: 2})
	if err != nil {
		return nil, nil, err
	}
	wide, err := snowflake.New(snowflake.Settings{Layout: snowflake.Layout{TimeBits: 41, WorkerBits: 6, SeqBits: 16}})
	if err != nil {
		return nil, nil, err
	}
	coarse, err := snowflake.New(snowflake.Settings{Layout: snowflake.Layout{TimeBits: 41, WorkerBits: 6, SeqBits: 16}, Worker: 1, Now: snowflake.CoarseNow})
	if err != nil {
		return nil, nil, err
	}
	var bufs sync.Pool
	bufs.New = func() any { b := make([]int64, 64); return &b }
	pcfg, err := pgsession.ParsePoolConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, err
	}
	alloc, err := segment.New([]*pgxpool.Pool{pool}, map[string]segment.TagConfig{"bench": {MaxStep: 2_000_000}},
		segment.WithPrepare(func(ctx context.Context, _ int) error { return migrations.Up(ctx, dsn, migrations.Segment) }))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	tag := alloc.Tag("bench")
	one := func(f func() (int64, error)) func() (int, error) {
		return func() (int, error) { _, err := f(); return 1, err }
	}
	cases := []goCase{
		{"snowflake NextID, Twitter 41/5/5/12", "snowflake.New(Settings{}).NextID()", one(twitter.NextID)},
		{"snowflake NextIDs x64, Twitter 41/5/5/12", "NextIDs(make([]int64, 64))", func() (int, error) {
			b := bufs.Get().(*[]int64)
			defer bufs.Put(b)
			return batch.NextIDs(*b)
		}},
		{"snowflake NextID, 41/0/6/16 (wide sequence)", "Layout{41, 0, 6, 16}", one(wide.NextID)},
		{"snowflake NextID, 41/0/6/16, CoarseNow clock", "Settings{Now: snowflake.CoarseNow}", one(coarse.NextID)},
		{"segment allocator Tag.Next", "segment.New(...).Tag(t).Next(ctx)", one(func() (int64, error) { return tag.Next(ctx) })},
	}
	return cases, func() { alloc.Close(); pool.Close() }, nil
}

// runFor calls next from g goroutines for about d and counts the ids.
func runFor(d time.Duration, g int, next func() (int, error)) (int64, time.Duration, error) {
	var total atomic.Int64
	var stop atomic.Bool
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range g {
		wg.Go(func() {
			var mine int64
			for !stop.Load() {
				for range 256 {
					n, err := next()
					if err != nil {
						once.Do(func() { firstErr = err })
						stop.Store(true)
						break
					}
					mine += int64(n)
				}
			}
			total.Add(mine)
		})
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return total.Load(), time.Since(start), firstErr
}

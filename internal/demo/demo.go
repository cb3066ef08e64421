// Package demo is what `shardid demo` runs: the toolkit's main job on an
// embedded default. It starts a local PostgreSQL server, installs a few
// logical shards with the safe generator, creates a table whose id is the
// generator's DEFAULT, inserts rows from several concurrent sessions, checks
// every id, prints a short report and removes everything it made.
package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/localpg"
	shsql "github.com/shardid/shardid/sql"
)

// Options of a demo run. Zero values mean 4 shards, 8 sessions and 200,000 rows.
type Options struct {
	Shards   int
	Sessions int
	Rows     int
	// DSN, when set, runs the demo in that (scratch) database instead of a
	// local server started for the run.
	DSN string
}

// Report is what the demo found.
type Report struct {
	Shards     int
	Sessions   int
	Rows       int64
	Elapsed    time.Duration
	IDsPerSec  float64
	Duplicates int64
	WrongShard int64 // ids whose shard bits differ from the shard they are stored in
	Samples    []Sample
}

// Sample is one stored id decoded inside PostgreSQL by the shard's helpers.
type Sample struct {
	Shard int
	ID    int64
	Time  time.Time
	Seq   int32
}

// Run runs the demo and writes its progress and report to w.
func Run(ctx context.Context, w io.Writer, opts Options) (*Report, error) {
	if opts.Shards <= 0 {
		opts.Shards = 4
	}
	if opts.Sessions <= 0 {
		opts.Sessions = 8
	}
	if opts.Rows <= 0 {
		opts.Rows = 200_000
	}
	dsn := opts.DSN
	if dsn == "" {
		fmt.Fprintln(w, "starting a local PostgreSQL server ...")
		server, err := localpg.Start(ctx, localpg.Options{})
		if err != nil {
			return nil, err
		}
		defer localpg.RemoveTemplates()
		defer server.Stop()
		if dsn, err = server.CreateDatabase(ctx, "app"); err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "PostgreSQL listening on 127.0.0.1:%d (data in %s, removed at the end)\n", server.Port, server.Dir)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	fmt.Fprintf(w, "installing the safe generator in %d logical shards ...\n", opts.Shards)
	for shard := range opts.Shards {
		ddl, err := shsql.Render(shsql.Params{Shard: shard})
		if err != nil {
			return nil, err
		}
		schema := pgx.Identifier{shsql.DefaultSchema(shard)}.Sanitize()
		ddl += fmt.Sprintf(`;CREATE TABLE IF NOT EXISTS %[1]s.likes (
			id bigint PRIMARY KEY DEFAULT %[1]s.next_id(),
			user_id bigint NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now())`, schema)
		if _, err := pool.Exec(ctx, ddl); err != nil {
			return nil, fmt.Errorf("install shard %d: %w", shard, err)
		}
	}
	fmt.Fprintf(w, "  CREATE TABLE shard_0000.likes (id bigint PRIMARY KEY DEFAULT shard_0000.next_id(), ...)\n")

	fmt.Fprintf(w, "inserting %d rows from %d concurrent sessions ...\n", opts.Rows, opts.Sessions)
	const batch = 1000
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	perSession := (opts.Rows + opts.Sessions - 1) / opts.Sessions
	for s := range opts.Sessions {
		g.Go(func() error {
			for done := 0; done < perSession; done += batch {
				n := min(batch, perSession-done)
				// Users are spread over shards by key; a batch goes to one shard.
				shard := (s + done/batch) % opts.Shards
				schema := pgx.Identifier{shsql.DefaultSchema(shard)}.Sanitize()
				if _, err := pool.Exec(gctx, "INSERT INTO "+schema+".likes (user_id) SELECT g FROM generate_series(1, $1) g", n); err != nil {
					return fmt.Errorf("session %d, shard %d: %w", s, shard, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rep := &Report{Shards: opts.Shards, Sessions: opts.Sessions, Elapsed: time.Since(start)}

	// Check every id: unique across all shards, and carrying its own shard.
	union := ""
	for shard := range opts.Shards {
		if shard > 0 {
			union += " UNION ALL "
		}
		schema := pgx.Identifier{shsql.DefaultSchema(shard)}.Sanitize()
		union += fmt.Sprintf("SELECT id, %d AS shard, %s.id_shard(id) AS bits FROM %s.likes", shard, schema, schema)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*), count(*) - count(DISTINCT id), count(*) FILTER (WHERE shard <> bits) FROM ("+union+") a").
		Scan(&rep.Rows, &rep.Duplicates, &rep.WrongShard); err != nil {
		return nil, err
	}
	rep.IDsPerSec = float64(rep.Rows) / rep.Elapsed.Seconds()
	for shard := range opts.Shards {
		schema := pgx.Identifier{shsql.DefaultSchema(shard)}.Sanitize()
		smp := Sample{Shard: shard}
		if err := pool.QueryRow(ctx, fmt.Sprintf("SELECT id, %[1]s.id_time(id), %[1]s.id_seq(id) FROM %[1]s.likes ORDER BY id DESC LIMIT 1", schema)).
			Scan(&smp.ID, &smp.Time, &smp.Seq); err != nil {
			return nil, err
		}
		rep.Samples = append(rep.Samples, smp)
	}
	printReport(w, rep)
	if rep.Duplicates != 0 || rep.WrongShard != 0 {
		return rep, fmt.Errorf("demo found %d duplicate ids and %d ids in the wrong shard", rep.Duplicates, rep.WrongShard)
	}
	return rep, nil
}

func printReport(w io.Writer, r *Report) {
	fmt.Fprintf(w, "\n%d rows in %d shards from %d sessions in %.2fs: %.0f ids per second\n",
		r.Rows, r.Shards, r.Sessions, r.Elapsed.Seconds(), r.IDsPerSec)
	fmt.Fprintln(w, "newest id of each shard, decoded inside PostgreSQL (id_time, id_shard, id_seq):")
	for _, s := range r.Samples {
		fmt.Fprintf(w, "  %d  time %s  shard %d  seq %d\n", s.ID, s.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), s.Shard, s.Seq)
	}
	fmt.Fprintf(w, "duplicates found: %d\n", r.Duplicates)
	fmt.Fprintf(w, "ids carrying another shard's id: %d\n", r.WrongShard)
}

package genbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	shsql "github.com/shardid/shardid/sql"
)

// Options of a run. Zero values mean 1,000,000 ids, 3 rounds and no
// single-row INSERT cases.
type Options struct {
	IDs    int
	Rounds int
	// Clients lists the session counts of the single-row INSERT cases
	// (each run with the simple and the prepared protocol); none when empty.
	Clients []int
	// InsertFor is how long each single-row INSERT case runs per round
	// (zero means 5 s).
	InsertFor time.Duration
	// Progress, when set, is called before each measurement.
	Progress func(round int, name string)
}

// Case names.
const (
	CaseNextval         = "nextval"
	CaseSafe            = "safe"
	CaseInstagram       = "instagram"
	CaseInsertSerial    = "insert bigserial"
	CaseInsertSafe      = "insert safe DEFAULT"
	CaseInsertInstagram = "insert instagram DEFAULT"
	// The C generator's cases (ext/shardid), where the server offers it.
	CaseSafeC       = "safe C"
	CaseInsertSafeC = "insert safe C DEFAULT"
)

// Case is one measured statement.
type Case struct {
	Name   string          `json:"name"`
	SQL    string          `json:"sql"`
	Median time.Duration   `json:"median_ns"`
	All    []time.Duration `json:"all_ns"`
}

// PerID is the median time per id.
func (c Case) PerID(ids int) time.Duration { return c.Median / time.Duration(ids) }

// Result of a run, with the ratios the project's goals are stated in.
type Result struct {
	IDs    int    `json:"ids"`
	Rounds int    `json:"rounds"`
	Server string `json:"server"`
	// Machine is the machine the run was on (see Machine).
	Machine string `json:"machine"`
	Cases   []Case `json:"cases"`
	// SafeSpeedup is instagram time / safe time (goal: at least 2).
	SafeSpeedup float64 `json:"safe_speedup_vs_instagram"`
	// SafeOverNextval is safe time / bare nextval time (goal: at most
	// GoalOverNextval).
	SafeOverNextval float64 `json:"safe_over_nextval"`
	// InsertRatio is the bulk INSERT with the safe DEFAULT over the same
	// INSERT into a bigserial table (goal: at most GoalInsertRatio).
	InsertRatio float64 `json:"insert_safe_over_bigserial"`
	// InsertInstagramRatio is the same for the instagram DEFAULT.
	InsertInstagramRatio float64 `json:"insert_instagram_over_bigserial"`
	// Inserts are the single-row INSERT cases (Options.Clients).
	Inserts []InsertRun `json:"single_row_inserts,omitempty"`

	// CGenerator says whether the run measured the C generator (shard
	// 3): the server offers the shardid extension (make ext) and the
	// session may create it. The safe cases above are the PL/pgSQL
	// generator, the default, either way.
	CGenerator bool `json:"c_generator"`
	// COverNextval and InsertCRatio are SafeOverNextval and InsertRatio
	// for the C generator.
	COverNextval float64 `json:"c_over_nextval,omitempty"`
	InsertCRatio float64 `json:"insert_c_over_bigserial,omitempty"`
}

// Case returns the named case.
func (r *Result) Case(name string) Case {
	for _, c := range r.Cases {
		if c.Name == name {
			return c
		}
	}
	return Case{}
}

// Run installs what it needs into schemas shardid_bench, shard_0001 and
// shard_0002 of the database conn is connected to (dropping them first:
// point it at a scratch database) and measures.
func Run(ctx context.Context, conn *pgx.Conn, opts Options) (*Result, error) {
	if opts.IDs <= 0 {
		opts.IDs = 1_000_000
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 3
	}
	if opts.InsertFor <= 0 {
		opts.InsertFor = 5 * time.Second
	}
	// The generators' advisory locks are one namespace per database: a
	// session elsewhere holding one (by accident or on purpose) must make
	// the bench fail, not hang. The cases themselves may run for minutes.
	if _, err := conn.Exec(ctx, `SET lock_timeout = '10s'; SET statement_timeout = '30min'`); err != nil {
		return nil, err
	}
	safe, err := shsql.Render(shsql.Params{Shard: 1, Generator: shsql.GeneratorPLpgSQL})
	if err != nil {
		return nil, err
	}
	insta, err := shsql.Render(shsql.Params{Shard: 2, Variant: shsql.Instagram})
	if err != nil {
		return nil, err
	}
	withC, err := offersC(ctx, conn)
	if err != nil {
		return nil, err
	}
	cSetup := ""
	if withC {
		ddl, err := shsql.Render(shsql.Params{Shard: 3, Generator: shsql.GeneratorC})
		if err != nil {
			return nil, err
		}
		cSetup = "CREATE EXTENSION IF NOT EXISTS " + shsql.ExtensionName + " VERSION '" + shsql.ExtensionVersion + "';" + ddl +
			";CREATE TABLE shard_0003.likes (id bigint PRIMARY KEY DEFAULT shard_0003.next_id(), v int);"
	}
	setup := `DROP SCHEMA IF EXISTS shardid_bench, shard_0001, shard_0002, shard_0003 CASCADE;` + safe + ";" + insta + ";" + cSetup + `
		CREATE SCHEMA shardid_bench;
		CREATE SEQUENCE shardid_bench.seq;
		CREATE TABLE shardid_bench.serial (id bigserial PRIMARY KEY, v int);
		CREATE TABLE shard_0001.likes (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), v int);
		CREATE TABLE shard_0002.likes (id bigint PRIMARY KEY DEFAULT shard_0002.next_id(), v int);`
	if _, err := conn.Exec(ctx, setup); err != nil {
		return nil, fmt.Errorf("bench setup: %w", err)
	}
	res := &Result{IDs: opts.IDs, Rounds: opts.Rounds, CGenerator: withC}
	res.Machine = Machine()
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&res.Server); err != nil {
		return nil, err
	}
	n := fmt.Sprint(opts.IDs)
	res.Cases = []Case{
		{Name: CaseNextval, SQL: "SELECT count(nextval('shardid_bench.seq')) FROM generate_series(1, " + n + ")"},
		{Name: CaseSafe, SQL: "SELECT count(shard_0001.next_id()) FROM generate_series(1, " + n + ")"},
		{Name: CaseInstagram, SQL: "SELECT count(shard_0002.next_id()) FROM generate_series(1, " + n + ")"},
		{Name: CaseInsertSerial, SQL: "INSERT INTO shardid_bench.serial (v) SELECT g FROM generate_series(1, " + n + ") g"},
		{Name: CaseInsertSafe, SQL: "INSERT INTO shard_0001.likes (v) SELECT g FROM generate_series(1, " + n + ") g"},
		{Name: CaseInsertInstagram, SQL: "INSERT INTO shard_0002.likes (v) SELECT g FROM generate_series(1, " + n + ") g"},
	}
	truncate := "TRUNCATE shardid_bench.serial, shard_0001.likes, shard_0002.likes; CHECKPOINT"
	if withC {
		res.Cases = append(res.Cases,
			Case{Name: CaseSafeC, SQL: "SELECT count(shard_0003.next_id()) FROM generate_series(1, " + n + ")"},
			Case{Name: CaseInsertSafeC, SQL: "INSERT INTO shard_0003.likes (v) SELECT g FROM generate_series(1, " + n + ") g"})
		truncate = "TRUNCATE shardid_bench.serial, shard_0001.likes, shard_0002.likes, shard_0003.likes; CHECKPOINT"
	}
	for round := range opts.Rounds {
		if _, err := conn.Exec(ctx, truncate); err != nil {
			return nil, err
		}
		for i := range res.Cases {
			c := &res.Cases[i]
			if opts.Progress != nil {
				opts.Progress(round+1, c.Name)
			}
			start := time.Now()
			if _, err := conn.Exec(ctx, c.SQL); err != nil {
				return nil, fmt.Errorf("bench %s: %w", c.Name, err)
			}
			c.All = append(c.All, time.Since(start))
		}
	}
	for i := range res.Cases {
		c := &res.Cases[i]
		sorted := slices.Clone(c.All)
		slices.Sort(sorted)
		c.Median = sorted[len(sorted)/2]
	}
	med := func(name string) float64 { return float64(res.Case(name).Median) }
	res.SafeSpeedup = med(CaseInstagram) / med(CaseSafe)
	res.SafeOverNextval = med(CaseSafe) / med(CaseNextval)
	res.InsertRatio = med(CaseInsertSafe) / med(CaseInsertSerial)
	res.InsertInstagramRatio = med(CaseInsertInstagram) / med(CaseInsertSerial)
	if withC {
		res.COverNextval = med(CaseSafeC) / med(CaseNextval)
		res.InsertCRatio = med(CaseInsertSafeC) / med(CaseInsertSerial)
	}
	if len(opts.Clients) > 0 {
		if res.Inserts, err = runInserts(ctx, conn, opts, withC, opts.Progress); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// offersC reports whether the server offers the shardid extension at the
// version this release installs and the session's role may create it (a
// superuser): then the run measures the C generator beside the default.
func offersC(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_available_extension_versions WHERE name = $1 AND version = $2)
		AND (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)`, shsql.ExtensionName, shsql.ExtensionVersion).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look for the shardid extension: %w", err)
	}
	return ok, nil
}

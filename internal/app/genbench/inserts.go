package genbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Protocols of the single-row INSERT cases.
const (
	// ProtocolSimple sends each INSERT as text, as pgbench does by default
	// (and psql, and drivers without prepared statements): every statement
	// is parsed and planned, the DEFAULT's function inlined, every time.
	ProtocolSimple = "simple"
	// ProtocolPrepared prepares the INSERT once per connection, as pgx
	// does by default: the plan, with the DEFAULT inlined, is cached.
	ProtocolPrepared = "prepared"
)

// InsertRun is one pgbench-style case: Clients sessions each running
// single-row INSERTs (each its own transaction, synchronous commit as the
// server has it) for a fixed time, into the bigserial table and into the
// table whose DEFAULT is the safe generator, the two alternating.
type InsertRun struct {
	Clients  int    `json:"clients"`
	Protocol string `json:"protocol"`
	// Transactions per second of each round.
	SerialTPS []float64 `json:"bigserial_tps"`
	SafeTPS   []float64 `json:"safe_tps"`
	// Ratio is the median of the rounds' safe / bigserial tps (goal: at
	// least GoalSingleRow(Protocol)). Rounds are paired because the machine
	// drifts between them.
	Ratio float64 `json:"safe_over_bigserial"`
	// CTPS and CRatio are SafeTPS and Ratio for the C generator's table,
	// when the run measures it (Result.CGenerator).
	CTPS   []float64 `json:"c_tps,omitempty"`
	CRatio float64   `json:"c_over_bigserial,omitempty"`
}

// runInserts measures the single-row INSERT cases of opts.Clients.
func runInserts(ctx context.Context, conn *pgx.Conn, opts Options, withC bool, progress func(round int, name string)) ([]InsertRun, error) {
	var runs []InsertRun
	for _, clients := range opts.Clients {
		for _, proto := range []string{ProtocolSimple, ProtocolPrepared} {
			runs = append(runs, InsertRun{Clients: clients, Protocol: proto})
		}
	}
	for round := range opts.Rounds {
		truncate, tables := "TRUNCATE shardid_bench.serial, shard_0001.likes; CHECKPOINT", []string{"shardid_bench.serial", "shard_0001.likes"}
		if withC {
			truncate, tables = "TRUNCATE shardid_bench.serial, shard_0001.likes, shard_0003.likes; CHECKPOINT", append(tables, cTable)
		}
		if _, err := conn.Exec(ctx, truncate); err != nil {
			return nil, err
		}
		for i := range runs {
			r := &runs[i]
			// No table always runs first: the order turns every round.
			k := (round + i) % len(tables)
			tables := append(slices.Clone(tables[k:]), tables[:k]...)
			for _, table := range tables {
				if progress != nil {
					progress(round+1, fmt.Sprintf("%d clients, %s protocol, %s", r.Clients, r.Protocol, table))
				}
				tps, err := singleRowInserts(ctx, conn.Config(), table, r.Clients, r.Protocol, opts.InsertFor)
				if err != nil {
					return nil, fmt.Errorf("bench single-row inserts into %s, %d clients: %w", table, r.Clients, err)
				}
				switch table {
				case "shardid_bench.serial":
					r.SerialTPS = append(r.SerialTPS, tps)
				case cTable:
					r.CTPS = append(r.CTPS, tps)
				default:
					r.SafeTPS = append(r.SafeTPS, tps)
				}
			}
		}
	}
	for i := range runs {
		r := &runs[i]
		r.Ratio = pairedRatio(r.SafeTPS, r.SerialTPS)
		if withC {
			r.CRatio = pairedRatio(r.CTPS, r.SerialTPS)
		}
	}
	return runs, nil
}

// cTable is the C generator's table in the single-row cases.
const cTable = "shard_0003.likes"

// pairedRatio is the median of the rounds' a / b.
func pairedRatio(a, b []float64) float64 {
	ratios := make([]float64, len(b))
	for k := range ratios {
		ratios[k] = a[k] / b[k]
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// singleRowInserts runs clients sessions inserting one row per statement
// into table for d and returns the transactions per second of all of them.
func singleRowInserts(ctx context.Context, base *pgx.ConnConfig, table string, clients int, proto string, d time.Duration) (float64, error) {
	cfg := base.Copy()
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	if proto == ProtocolPrepared {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	}
	// As in Run: a held generator lock fails the bench instead of hanging it.
	cfg.RuntimeParams["lock_timeout"] = "10s"
	cfg.RuntimeParams["statement_timeout"] = "60s"
	conns := make([]*pgx.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	for range clients {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
	}
	sql := "INSERT INTO " + table + " (v) VALUES (1)"
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		first error
	)
	start := time.Now()
	deadline := start.Add(d)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			var err error
			for time.Now().Before(deadline) {
				if _, err = c.Exec(ctx, sql); err != nil {
					break
				}
				n++
			}
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

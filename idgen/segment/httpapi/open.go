package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/migrations"
)

// Source pool policy of a serving process: one loader per tag talks to a
// source at a time, so a few connections are plenty, and a dead source
// must fail fast.
const (
	sourceMaxConns       = 4
	sourceConnectTimeout = 2 * time.Second
)

// OpenAllocator opens the sources of cfg (its ${VAR} references expanded
// with lookup) with the serving pool policy and returns an allocator over
// them whose sources get the shardid.segments table on first use
// (migrations.Segment). close releases the allocator and the pools.
func OpenAllocator(ctx context.Context, cfg *segment.Config, lookup func(string) (string, bool), logger *slog.Logger) (alloc *segment.Allocator, closeAll func(), err error) {
	if err := cfg.ExpandEnv(lookup); err != nil {
		return nil, nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	pools := make([]*pgxpool.Pool, len(cfg.Sources))
	closePools := func() {
		for _, p := range pools {
			if p != nil {
				p.Close()
			}
		}
	}
	for i, dsn := range cfg.Sources {
		pc, err := pgsession.ParsePoolConfig(dsn)
		if err != nil {
			closePools()
			return nil, nil, fmt.Errorf("segments.sources[%d]: %w", i, err)
		}
		pc.MaxConns = sourceMaxConns
		pc.ConnConfig.ConnectTimeout = sourceConnectTimeout
		if pools[i], err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			closePools()
			return nil, nil, fmt.Errorf("segments.sources[%d]: %w", i, err)
		}
	}
	alloc, err = segment.New(pools, cfg.Tags,
		segment.WithLogger(logger),
		segment.WithPrepare(func(ctx context.Context, i int) error {
			// Like init: a reachable server gets the database it lacks, and
			// the server's own error is told first.
			created, err := pgdatabase.Ensure(ctx, cfg.Sources[i])
			if err != nil {
				return err
			}
			if created {
				logger.Info("created segment source database", "source", i, "database", pools[i].Config().ConnConfig.Database)
			}
			return pgdatabase.Explain(migrations.Up(ctx, cfg.Sources[i], migrations.Segment))
		}))
	if err != nil {
		closePools()
		return nil, nil, err
	}
	return alloc, func() { alloc.Close(); closePools() }, nil
}

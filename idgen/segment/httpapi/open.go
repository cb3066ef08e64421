package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
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
	// migrationLockWait bounds one wait for golang-migrate's lock on a
	// source; the source is retried after it.
	migrationLockWait = 10 * time.Second
	// poolerProbeTimeout bounds the probe that tells a source reached
	// through a connection pooler.
	poolerProbeTimeout = 10 * time.Second
)

// OpenAllocator opens the sources of cfg (their ${VAR}s already expanded
// by the caller, who read the file) with the serving pool policy and
// returns an allocator over them whose sources are prepared at once, in the background: the
// database created when missing, the shardid.segments table migrated
// (migrations.Segment, waiting a bounded time for golang-migrate's lock
// and logging who holds it), and a warning logged when PUBLIC may
// connect to it. close releases the allocator and the pools.
//
// A source reached through a connection pooler (PgBouncer, in transaction
// or session mode) is used as it allows: its connections run their
// queries unprepared, nothing is created or migrated through it, and it is
// prepared once its table is at this binary's version (migrated through a
// direct DSN): until then its attempts fail with a *migrations.PoolerError
// that says so.
func OpenAllocator(ctx context.Context, cfg *segment.Config, logger *slog.Logger) (alloc *segment.Allocator, closeAll func(), err error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	pools := make([]*pgxpool.Pool, len(cfg.Sources))
	probes := make([]*pgsession.PoolerProbe, len(cfg.Sources))
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
		// Through a connection pooler, nothing prepared by name.
		probes[i] = pgsession.NewPoolerProbe(&pc.ConnConfig.Config, poolerProbeTimeout)
		pc.BeforeConnect = probes[i].BeforeConnect
		if pools[i], err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			closePools()
			return nil, nil, fmt.Errorf("segments.sources[%d]: %w", i, err)
		}
	}
	alloc, err = segment.New(pools, cfg.Tags,
		segment.WithLogger(logger),
		segment.WithPrepare(func(ctx context.Context, i int) error {
			db := pools[i].Config().ConnConfig.Database
			// A probe that fails (a missing database) is left to Ensure.
			if pooled, _ := probes[i].Pooled(ctx); !pooled {
				start := time.Now()
				// Like init: a reachable server gets the database it
				// lacks, and the server's own error is told first.
				created, err := pgdatabase.Ensure(ctx, cfg.Sources[i])
				if err != nil {
					return err
				}
				if created {
					logger.Info("created segment source database", "source", i, "database", db, "took", time.Since(start).Round(time.Millisecond))
				}
			}
			err := migrations.Up(ctx, cfg.Sources[i], migrations.Segment, migrations.WithPoolerCheck(),
				migrations.WithLockWait(migrationLockWait), migrations.WithLogger(logger.With("source", i)))
			if err != nil {
				return pgsession.ServerFirst(err)
			}
			// Named as the config names it and as the allocator's other
			// lines do: several sources often share a database name.
			cc := pools[i].Config().ConnConfig
			WarnPublicConnect(ctx, logger.With("source", fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, db),
				"config", fmt.Sprintf("segments.sources[%d]", i)), pools[i], "segment source", db)
			return nil
		}))
	if err != nil {
		closePools()
		return nil, nil, err
	}
	return alloc, func() { alloc.Close(); closePools() }, nil
}

// WarnPublicConnect logs a warning when PUBLIC holds CONNECT on the
// database db that q is connected to: any role may then take the advisory
// locks serve waits for there (golang-migrate's). A failed check is
// logged too, not returned: it is advice, not a condition to serve. The
// caller names the source in logger (logger.With("source", ...)): it is
// called once per source, and several sources often share a database
// name.
func WarnPublicConnect(ctx context.Context, logger *slog.Logger, q pgdatabase.Querier, what, db string) {
	open, err := pgdatabase.PublicCanConnect(ctx, q, db)
	switch {
	case err != nil:
		logger.Warn("cannot tell whether PUBLIC may connect to the "+what+" database", "database", db, "err", err)
	case open:
		logger.Warn("PUBLIC may connect to the "+what+" database: any role can then hold the advisory locks serve waits for; "+
			"REVOKE CONNECT ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM PUBLIC and grant CONNECT to the roles that need it (docs/segments.md)", "database", db)
	}
}

// Package snowflakeserve is the snowflake half of `shardid serve`: GET
// /v1/snowflake served from a worker id it leases in the background, the
// lease database created and migrated first (not through a connection
// pooler), and the /healthz of a file with no segments: section.
//
// It is one of the CLI's tools (internal/app), imported only by
// cmd/shardid.
package snowflakeserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/migrations"
)

// Bounds of serve's snowflake start-up: each attempt to create the lease
// database, to migrate it (golang-migrate's lock included) and to lease a
// worker; failed attempts are logged and retried after leaseRetry.
const (
	leaseDatabaseTimeout = 2 * time.Minute
	leaseLockWait        = 10 * time.Second
	leaseRetry           = 2 * time.Second
	leaseProbeTimeout    = 10 * time.Second
)

// Service serves GET /v1/snowflake from a worker it leases in the
// background: it answers 503 (and Ready says why) until the lease database
// is created and migrated and a worker is leased.
type Service struct {
	cfg    *snowflake.Config
	logger *slog.Logger
	pool   *pgxpool.Pool
	probe  *pgsession.PoolerProbe
	h      atomic.Pointer[snowflake.Handler]
	g      atomic.Pointer[snowflake.Generator]
	state  atomic.Pointer[error] // why there is no generator yet
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// New checks the snowflake: section and starts leasing a
// worker in the background; only a bad section is an error.
func New(configPath string, c *snowflake.Config, logger *slog.Logger) (*Service, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", configPath, err)
	}
	pc, err := pgsession.ParsePoolConfig(c.Leases)
	if err != nil {
		return nil, fmt.Errorf("%s: snowflake.leases: %w", configPath, err)
	}
	pc.MaxConns = 2 // the heartbeat and the release
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	// Through a connection pooler, nothing prepared by name.
	probe := pgsession.NewPoolerProbe(&pc.ConnConfig.Config, leaseProbeTimeout)
	pc.BeforeConnect = probe.BeforeConnect
	pool, err := pgxpool.NewWithConfig(context.Background(), pc) // connects lazily
	if err != nil {
		return nil, fmt.Errorf("%s: snowflake.leases: %w", configPath, err)
	}
	s := &Service{cfg: c, logger: logger, pool: pool, probe: probe, done: make(chan struct{})}
	starting := errors.New("no worker id leased yet")
	s.state.Store(&starting)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.start(ctx)
	return s, nil
}

// start prepares the lease database and leases a worker, retrying until
// it succeeds or ctx ends.
func (s *Service) start(ctx context.Context) {
	defer close(s.done)
	db := s.pool.Config().ConnConfig.Database
	prepared := false
	for attempt := 0; ; attempt++ {
		err := func() error {
			if !prepared {
				actx, cancel := context.WithTimeout(ctx, leaseDatabaseTimeout)
				defer cancel()
				// Through a pooler nothing is created or migrated (see
				// httpapi.OpenAllocator); a failed probe is left to Ensure.
				if pooled, _ := s.probe.Pooled(actx); !pooled {
					start := time.Now()
					created, err := pgdatabase.Ensure(actx, s.cfg.Leases)
					if err != nil {
						return err
					}
					if created {
						s.logger.Info("created the snowflake lease database", "database", db, "took", time.Since(start).Round(time.Millisecond))
					}
				}
				if err := migrations.Up(actx, s.cfg.Leases, migrations.Snowflake, migrations.WithPoolerCheck(),
					migrations.WithLockWait(leaseLockWait), migrations.WithLogger(s.logger)); err != nil {
					return pgsession.ServerFirst(err)
				}
				cc := s.pool.Config().ConnConfig
				httpapi.WarnPublicConnect(actx, s.logger.With("source", fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, db), "config", "snowflake.leases"),
					s.pool, "snowflake lease", db)
				prepared = true
			}
			actx, cancel := context.WithTimeout(ctx, leaseDatabaseTimeout)
			defer cancel()
			g, err := snowflake.Start(actx, s.pool, s.cfg.Settings(), append(s.cfg.LeaseOptions(), snowflake.WithLogger(s.logger))...)
			if err != nil {
				return err
			}
			s.g.Store(g)
			s.h.Store(snowflake.NewHandler(g))
			l, _ := g.Lease()
			s.logger.Info("serving snowflake ids", "datacenter", l.Datacenter, "worker", l.Worker, "token", l.Token, "epoch_ms", g.Layout().Epoch)
			return nil
		}()
		if err == nil || ctx.Err() != nil {
			return
		}
		err = fmt.Errorf("snowflake.leases: %w", err)
		s.state.Store(&err)
		if attempt%30 == 0 { // a line at once, then one a minute
			s.logger.Warn("no snowflake worker yet; retrying in the background", "database", db, "attempt", attempt+1, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leaseRetry):
		}
	}
}

// Ready is nil when GET /v1/snowflake can hand out an id now.
func (s *Service) Ready() error {
	if g := s.g.Load(); g != nil {
		return g.Ready()
	}
	return *s.state.Load()
}

func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, "{\"error\":%q}\n", s.Ready().Error())
}

// Stop ends the background start and releases the lease.
func (s *Service) Stop() {
	s.once.Do(func() {
		s.cancel()
		<-s.done
		if g := s.g.Load(); g != nil {
			// Short: the lease expires by itself after its TTL, and a stop
			// must not wait on an unreachable database.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := g.Close(ctx); err != nil {
				s.logger.Warn("snowflake lease not released; it expires after its TTL", "err", err)
			}
		}
		s.pool.Close()
	})
}

// Route routes GET /v1/snowflake to sf and everything else to rest.
func Route(sf http.Handler, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == snowflake.Path {
			sf.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// Health is /healthz of a file with a snowflake: section and no
// segments: one: 200 {"status":"ok"} while an id can be handed out, 503
// {"status":"not ready","problems":[...]} otherwise.
func Health(sf *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, "{\"error\":%q}\n", "no such path "+r.URL.Path)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprintf(w, "{\"error\":%q}\n", "method "+r.Method+" not allowed")
			return
		}
		if !httpapi.NoBody(w, r) {
			return
		}
		if err := sf.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "{\"status\":\"not ready\",\"problems\":[%q]}\n", "snowflake: "+err.Error())
			return
		}
		fmt.Fprintln(w, `{"status":"ok"}`)
	})
}

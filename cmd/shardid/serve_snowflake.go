package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/migrations"
)

// startSnowflake leases a worker id from the snowflake: section's database
// and returns the handler of GET /v1/snowflake and a function that
// releases the lease.
func startSnowflake(ctx context.Context, configPath string, c *snowflake.Config, logger *slog.Logger) (*snowflake.Handler, func(), error) {
	if err := c.ExpandEnv(os.LookupEnv); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", configPath, err)
	}
	if err := c.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", configPath, err)
	}
	if err := migrations.Up(ctx, c.Leases, migrations.Snowflake); err != nil {
		return nil, nil, fmt.Errorf("snowflake.leases: %w", err)
	}
	pc, err := pgxpool.ParseConfig(c.Leases)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: snowflake.leases: %w", configPath, err)
	}
	pc.MaxConns = 2 // the heartbeat and the release
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, nil, fmt.Errorf("snowflake.leases: %w", err)
	}
	g, err := snowflake.Start(ctx, pool, c.Settings(), append(c.LeaseOptions(), snowflake.WithLogger(logger))...)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	l, _ := g.Lease()
	logger.Info("serving snowflake ids", "datacenter", l.Datacenter, "worker", l.Worker, "token", l.Token, "epoch_ms", g.Layout().Epoch)
	stop := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Close(cctx); err != nil {
			logger.Warn("snowflake lease not released; it expires after its TTL", "err", err)
		}
		pool.Close()
	}
	return snowflake.NewHandler(g), stop, nil
}

// withSnowflake routes GET /v1/snowflake to sf and everything else to rest.
func withSnowflake(sf *snowflake.Handler, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == snowflake.Path {
			sf.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// serveSnowflakeOnly is serve for a file with a snowflake: section and no
// segments: one: /v1/snowflake and a /healthz that names the lease.
func serveSnowflakeOnly(ctx context.Context, configPath string, c *snowflake.Config, listen string, grace time.Duration, logger *slog.Logger) error {
	sf, stop, err := startSnowflake(ctx, configPath, c, logger)
	if err != nil {
		return err
	}
	defer stop()
	health := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, "{\"error\":%q}\n", "no such path "+r.URL.Path)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"status":"ok"}`)
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	logger.Info("serving ids", "addr", ln.Addr().String(), "routes", snowflake.Path)
	err = httpapi.Serve(ctx, ln, withSnowflake(sf, health), grace)
	if err == nil || errors.Is(err, context.Canceled) {
		logger.Info("stopped")
		return nil
	}
	return err
}

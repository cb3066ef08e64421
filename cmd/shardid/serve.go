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

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/shardmgr"
)

func newServeCmd() *cobra.Command {
	var (
		listen  string
		grace   time.Duration
		heapMiB int64
	)
	var configPath *string
	cmd := &cobra.Command{
		Use:   "serve [--config FILE] [--listen ADDR]",
		Short: "Serve business ids from the segments: section of the cluster file over HTTP",
		Long: `Serves GET /v1/ids/{tag}?count=N, GET /healthz and GET /metrics, handing out
ids from number segments taken from the source databases of the segments:
section of the cluster file (which may hold only that section).

It needs one database per entry of segments.sources (the order is part of the
id layout) and creates what is missing as soon as each server answers: the
database (CREATE DATABASE through the server's postgres database, so the role
needs CREATEDB there, as for init) and the shardid.segments table. A source
that cannot be reached or prepared is retried in the background and logged
with the server's own error first. Stops gracefully on SIGINT or SIGTERM. See
docs/segments.md.

With a snowflake: section (leases: a DSN, datacenter, epoch_ms, ttl), it also
serves GET /v1/snowflake?count=N from a worker id leased in that database; a
file may hold only that section. See docs/schemes.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace <= 0 {
				return usagef("--grace must be positive")
			}
			if heapMiB < 0 {
				return usagef("--heap-mib must not be negative")
			}
			return serve(cmd.Context(), *configPath, listen, grace, heapMiB<<20)
		},
	}
	configPath = addClusterConfigFlag(cmd)
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve HTTP on")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long shutdown waits for requests in flight")
	cmd.Flags().Int64Var(&heapMiB, "heap-mib", httpapi.DefaultHeapLimit>>20, "collect garbage when the heap reaches this many MiB (GOGC=off, GOMEMLIMIT); 0 keeps Go's default; GOGC or GOMEMLIMIT in the environment win")
	return cmd
}

func serve(ctx context.Context, configPath, listen string, grace time.Duration, heapLimit int64) error {
	cfg, err := shardmgr.LoadConfig(configPath)
	if err != nil {
		return err
	}
	seg := cfg.Segments
	if seg == nil && cfg.Snowflake == nil {
		return fmt.Errorf("%s: no segments: section (nor snowflake:)", configPath)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if seg == nil {
		return serveSnowflakeOnly(ctx, configPath, cfg.Snowflake, listen, grace, logger)
	}
	alloc, closeAll, err := httpapi.OpenAllocator(ctx, seg, os.LookupEnv, logger)
	if err != nil {
		return fmt.Errorf("%s: %w", configPath, err)
	}
	defer closeAll()
	h, err := httpapi.New(alloc, httpapi.WithLogger(logger))
	if err != nil {
		return err
	}
	var handler http.Handler = h
	if cfg.Snowflake != nil {
		sf, stop, err := startSnowflake(ctx, configPath, cfg.Snowflake, logger)
		if err != nil {
			return err
		}
		defer stop()
		handler = withSnowflake(sf, h)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	gc := "go default (GOGC, GOMEMLIMIT)"
	if httpapi.LimitGC(heapLimit) {
		gc = fmt.Sprintf("at %d MiB of heap", heapLimit>>20)
	}
	logger.Info("serving ids", "addr", ln.Addr().String(), "tags", alloc.Tags(), "sources", len(seg.Sources), "gc", gc)
	err = httpapi.Serve(ctx, ln, handler, grace)
	if err == nil || errors.Is(err, context.Canceled) {
		logger.Info("stopped")
		return nil
	}
	return err
}

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
	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/app/serveconfig"
	"github.com/shardid/shardid/internal/app/snowflakeserve"
	"github.com/shardid/shardid/internal/loopback"
)

func newServeCmd() *cobra.Command {
	var (
		listen     string
		grace      time.Duration
		heapMiB    int64
		allowHosts []string
	)
	var configPath *string
	cmd := &cobra.Command{
		Use:   "serve [--config FILE] [--listen ADDR]",
		Short: "Serve business ids from the segments: section of the cluster file over HTTP",
		Long: `Serves GET /v1/ids/{tag}?count=N, GET /healthz and GET /metrics, handing out
ids from number segments taken from the source databases of the segments:
section of the cluster file (which may hold only that section).

It needs one database per entry of segments.sources (the order is part of the
id layout) and creates what is missing at start-up, in the background, as soon
as each server answers: the database (CREATE DATABASE through the server's
postgres database, so the role needs CREATEDB there, as for init) and the
shardid.segments table. A source that cannot be reached or prepared (or whose
golang-migrate lock someone holds: the holder is logged) is retried in the
background and logged with the server's own error first; /healthz answers 503
until every source is usable and every tag has ids. It listens at once and
stops on SIGINT or SIGTERM in every state. It has no authentication and no
TLS: keep --listen on a loopback address behind a proxy (a warning says so
otherwise). On a loopback address it answers only requests whose Host header
names loopback (localhost, 127.0.0.1, ::1) or a name given with --allow-host
(a proxy that passes its own name on), so that a web page whose name was
pointed at 127.0.0.1 (DNS rebinding) cannot draw ids; others get 421.
See docs/segments.md.

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
			return serve(cmd.Context(), *configPath, listen, grace, heapMiB<<20, allowHosts)
		},
	}
	configPath = addConfigPathFlag(cmd)
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve HTTP on")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long shutdown waits for requests in flight")
	cmd.Flags().StringArrayVar(&allowHosts, "allow-host", nil, "a Host header name to serve besides loopback's when listening on loopback (repeatable; a proxy's name)")
	cmd.Flags().Int64Var(&heapMiB, "heap-mib", httpapi.DefaultHeapLimit>>20, "collect garbage when the heap reaches this many MiB (GOGC=off, GOMEMLIMIT); 0 keeps Go's default; GOGC or GOMEMLIMIT in the environment win")
	return cmd
}

func serve(ctx context.Context, configPath, listen string, grace time.Duration, heapLimit int64, allowHosts []string) error {
	cfg, err := serveconfig.Load(configPath, os.LookupEnv)
	if err != nil {
		return err
	}
	seg := cfg.Segments
	if seg == nil && cfg.Snowflake == nil {
		return fmt.Errorf("%s: no segments: section (nor snowflake:)", configPath)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// Everything that needs a database starts in the background once the
	// sections are known to be valid: serve listens at once, /healthz says
	// what it waits for, and a signal stops it whatever it waits for.
	var sf *snowflakeserve.Service
	if cfg.Snowflake != nil {
		if sf, err = snowflakeserve.New(configPath, cfg.Snowflake, logger); err != nil {
			return err
		}
		defer sf.Stop()
	}
	var handler http.Handler
	var tags []string
	if seg != nil {
		alloc, closeAll, err := httpapi.OpenAllocator(ctx, seg, logger)
		if err != nil {
			return fmt.Errorf("%s: %w", configPath, err)
		}
		defer closeAll()
		opts := []httpapi.Option{httpapi.WithLogger(logger)}
		if sf != nil {
			opts = append(opts, httpapi.WithCheck("snowflake", sf.Ready))
		}
		h, err := httpapi.New(alloc, opts...)
		if err != nil {
			return err
		}
		handler, tags = h, alloc.Tags()
		if sf != nil {
			handler = snowflakeserve.Route(sf, h)
		}
	} else {
		handler = snowflakeserve.Route(sf, snowflakeserve.Health(sf))
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	if exposed, _ := exposedListen(ln.Addr()); !exposed {
		handler = loopback.Guard(handler, allowHosts, "shardid serve: this server answers loopback names only (start it with --allow-host NAME to answer NAME)")
	}
	if exposed, why := exposedListen(ln.Addr()); exposed {
		logger.Warn("serving on "+why+" with no authentication and no TLS: anyone who can reach it can draw ids and read /metrics; "+
			"listen on 127.0.0.1 behind a proxy that terminates TLS and checks a token, or firewall the port (docs/segments.md)", "addr", ln.Addr().String())
	}
	gc := "go default (GOGC, GOMEMLIMIT)"
	if httpapi.LimitGC(heapLimit) {
		gc = fmt.Sprintf("at %d MiB of heap", heapLimit>>20)
	}
	routes := []string{"/healthz"}
	if seg != nil {
		routes = append(routes, "/v1/ids/{tag}", "/metrics")
	}
	if sf != nil {
		routes = append(routes, snowflake.Path)
	}
	logger.Info("serving ids", "addr", ln.Addr().String(), "routes", routes, "tags", tags, "gc", gc)
	err = httpapi.Serve(ctx, ln, handler, grace)
	if err == nil || errors.Is(err, context.Canceled) {
		logger.Info("stopped")
		return nil
	}
	return err
}

// exposedListen reports whether addr is reachable from other machines
// (any address but a loopback one), and how to say so.
func exposedListen(addr net.Addr) (bool, string) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return false, ""
	}
	switch {
	case tcp.IP == nil || tcp.IP.IsUnspecified():
		return true, "every interface"
	case tcp.IP.IsLoopback():
		return false, ""
	}
	return true, "a non-loopback address"
}

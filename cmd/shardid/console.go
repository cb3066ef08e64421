package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/internal/app/console"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// consoleTokenEnv names the environment variable an action token can come
// from; without it `console --actions` makes one and prints it.
const consoleTokenEnv = "SHARDID_CONSOLE_TOKEN"

func newConsoleCmd() *cobra.Command {
	var (
		listen, dir, serveURL string
		userHeader            string
		actions, allowRemote  bool
		refresh               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "console [--config FILE] [--listen 127.0.0.1:8090] [--dir DIR] [--serve-url URL] [--actions]",
		Short: "Serve the operator console: the map, the moves, verify and the id decoder on a web page",
		Long: `Serves a web page of the cluster, built from what 'status', 'rebalance status',
'verify', 'migrate status' and 'id decode' print with --json (and the same
JSON under /api/): the map with a strip of the shard space per host, the
moves in progress refreshed live, a button that runs verify (read-only) and
streams its result, the migration versions (--dir, default the cluster file's
migrations:), an id decoder, and the ID service's metrics when --serve-url
names a running 'shardid serve'. Everything is in the binary: it works
offline. No page shows a password.

It listens on loopback only unless --allow-remote (it has no TLS). It is
read-only unless --actions: then rebalance apply, abort and cleanup appear,
each behind a confirmation and the action token (from $SHARDID_CONSOLE_TOKEN,
else made up and printed at start); without --actions their endpoints answer
403. Every action asked with the token is recorded in the catalog's audit log
(shardid.console_audit; the Audit log page, /api/audit): who (the header
--user-header names, set by an authenticating proxy, else the client's
address), when, what and the result. See docs/console.md.

  shardid console                     # http://127.0.0.1:8090
  shardid console --actions --serve-url http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().StringVar(&listen, "listen", console.DefaultListen, "address to serve on (loopback unless --allow-remote)")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback --listen and any Host header (no TLS: put a proxy with TLS and authentication in front)")
	cmd.Flags().BoolVar(&actions, "actions", false, "offer rebalance apply, abort and cleanup (each needs the token and a confirmation)")
	cmd.Flags().StringVar(&userHeader, "user-header", "", "request header naming who asks for an action, for the audit log (e.g. X-Forwarded-User from an authenticating proxy; default: the client's address)")
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the shards' migrations, for the migrations panel (default: the cluster file's migrations:)")
	cmd.Flags().StringVar(&serveURL, "serve-url", "", "base URL of a running 'shardid serve' whose /metrics the ID service panel reads")
	cmd.Flags().DurationVar(&refresh, "refresh", 2*time.Second, "how often the map and the moves refresh in the browser")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := console.CheckListen(listen, allowRemote); err != nil {
			return usagef("%v; --allow-remote serves it anyway (put TLS and authentication in front)", err)
		}
		if refresh < 100*time.Millisecond {
			return usagef("--refresh must be at least 100ms")
		}
		mdir, err := migrationDir(cmd, dir, *configPath)
		if err != nil {
			return err
		}
		var set *migrate.MigrationSet
		if mdir != "" {
			if set, err = migrate.LoadMigrationDir(mdir); err != nil {
				return err
			}
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
		opts := console.Options{Migrations: set, MigrationsDir: mdir, ConfigPath: *configPath, ServeURL: serveURL,
			Actions: actions, AllowRemote: allowRemote, UserHeader: userHeader, Refresh: refresh, Logger: logger,
			// A host added since the console started: the file is read
			// again as it was at startup (flags included).
			Reopen: func(context.Context) (*cluster.Cluster, error) { return openCluster(cmd, *configPath) }}
		if actions {
			opts.Token = os.Getenv(consoleTokenEnv)
			if opts.Token == "" {
				if opts.Token, err = console.NewToken(); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "action token (or set %s): %s\n", consoleTokenEnv, opts.Token)
			}
		}
		con, err := console.New(c, opts)
		if err != nil {
			return usageError{err}
		}
		defer con.Close()
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		mode := "read-only"
		if actions {
			mode = "actions on"
		}
		logger.Info("console serving", "url", "http://"+ln.Addr().String()+"/", "mode", mode)
		return con.Serve(cmd.Context(), ln)
	}
	return cmd
}

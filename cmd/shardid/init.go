package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/migrate"
)

func newInitCmd() *cobra.Command {
	var (
		workers int
		asJSON  bool
		dir     string
	)
	cmd := &cobra.Command{
		Use:   "init [--config FILE]",
		Short: "Create the catalog and every logical shard on its host, or finish what is missing",
		Long: `Creates the databases named in the cluster file when they are missing, the
catalog (shardid schema, golang-migrate), the map of logical shards to hosts in
balanced contiguous ranges, and every shard's schema and generator on its host,
in parallel per host. Running it again is safe: it finishes what is missing and
changes nothing else. It refuses a cluster file that contradicts the catalog on
what is fixed once initialised (cluster name, shard count, epoch). The
cluster file's form is in docs/shardmgr.md; 'shardid local up' writes one for
local servers (and runs init).

With --dir, every shard is then brought to the migration version of the others
(or to the newest in DIR when no shard has been migrated yet): a shard that init
had to create again gets the same tables as the rest. Without --dir, the
directory the cluster file names (migrations: ./migrations, relative to the
file) is used, if any. See docs/migrations.md.`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().IntVar(&workers, "workers", install.DefaultWorkers, "connections per host installing shards in parallel")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().StringVar(&dir, "dir", "", "per-shard migrations: bring every shard to the version of the others (default: the cluster file's migrations:)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if workers < 1 {
			return usagef("--workers must be at least 1")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		cfg := c.Config()
		opts := install.InitOptions{
			Workers: workers,
			Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
		bar := newProgress(os.Stderr)
		opts.Progress = bar.counter("installing shards")
		var bars *hostBars
		if dir, err = migrationDir(cmd, dir, *configPath); err != nil {
			return err
		}
		if dir != "" {
			// A directory that does not load or render fails before anything changes.
			if opts.Migrations, err = migrate.LoadMigrationDir(dir); err != nil {
				return err
			}
			bars = newHostBars(os.Stderr, "migrate up")
			opts.Migrate = migrate.Options{
				// Migrating starts when installing is over: end the install bar's line first.
				Progress: func(p migrate.HostProgress) { bar.Done(); bars.Update(p) },
				Waiting:  bars.Waiting,
			}
		}
		res, err := install.Init(cmd.Context(), c, opts)
		bar.Done()
		if bars != nil {
			bars.Done()
		}
		if res == nil || (res.Migrated == nil && err != nil) {
			return err
		}
		migrated, migrateErr := res.Migrated, err
		out := cmd.OutOrStdout()
		if asJSON {
			if err := writeJSON(out, res); err != nil {
				return err
			}
			return migrateErr
		}
		for _, w := range res.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
		}
		printInitResult(out, cfg, res)
		if migrated != nil {
			printMigrateResult(out, migrated)
		}
		return migrateErr
	}
	return cmd
}

func printInitResult(out io.Writer, cfg *shardmgr.Config, res *install.InitResult) {
	for _, db := range res.CreatedDatabases {
		fmt.Fprintf(out, "created database %s\n", db)
	}
	if u := res.CatalogUpgrade; u != nil {
		fmt.Fprintf(out, "upgraded the catalog schema from %d to %d\n", u.From, u.To)
	}
	switch {
	case res.CatalogCreated:
		fmt.Fprintf(out, "created cluster %s in the catalog: %d shards on %d hosts\n", res.Cluster, res.Installed+res.Unchanged, len(cfg.Hosts))
	case len(res.CatalogChanges) > 0:
		fmt.Fprintf(out, "catalog: %s\n", strings.Join(res.CatalogChanges, "; "))
	}
	if !res.Changed() {
		fmt.Fprintf(out, "cluster %s is complete: nothing to do (generation %d, %d shards)\n", res.Cluster, res.Generation, res.Unchanged)
		return
	}
	fmt.Fprintf(out, "installed %d shards, %d already in place; generation %d; %.2fs\n",
		res.Installed, res.Unchanged, res.Generation, res.Elapsed.Seconds())
}

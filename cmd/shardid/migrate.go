package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the application's migrations to every logical shard on every host",
		Long: `Migrations are tern files (NNN_name.sql: up SQL, then a line
"---- create above / drop below ----", then down SQL), written once and rendered
per shard with the template values {{.schema}} (shard_0005), {{.shard_id}} (5)
and {{.next_id}} (shard_0005.next_id()):

  CREATE TABLE {{.schema}}.likes (id bigint PRIMARY KEY DEFAULT {{.next_id}}, ...);

Each shard keeps its version in <schema>.schema_version (tern's table, so the
plain tern CLI agrees) and the last failure in <schema>.schema_version_failure.
--dir is your application's directory of such files (the repository's own
migrations/ holds shardid's catalog, not shard migrations):

  shardid migrate up --dir shard-migrations
  shardid migrate status --dir shard-migrations
  shardid migrate render --shard 5 --dir shard-migrations   # no cluster needed

See docs/migrations.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newMigrateRunCmd(migrate.Up), newMigrateRunCmd(migrate.Down), newMigrateStatusCmd(),
		newMigrateRenderCmd(), newMigrateGeneratorCmd())
	return cmd
}

// migrateDirFlag adds the --dir flag.
func migrateDirFlag(cmd *cobra.Command) *string {
	dir := new(string)
	cmd.Flags().StringVar(dir, "dir", "", "directory of tern migration files (default: the cluster file's migrations:)")
	return dir
}

// migrationDir is the migrations directory a command uses: --dir when
// given, else the one the cluster file at configPath names (relative to
// the file), else "".
func migrationDir(cmd *cobra.Command, dir, configPath string) (string, error) {
	if cmd.Flags().Changed("dir") {
		if dir == "" {
			return "", usagef("--dir must not be empty")
		}
		return dir, nil
	}
	if configPath == "" {
		return "", nil
	}
	cfg, err := shardmgr.LoadConfig(configPath)
	if err != nil {
		return "", err
	}
	return cfg.MigrationsDir(), nil
}

// loadMigrationDir loads the migrations directory (--dir, or the cluster
// file's migrations:), a usage error when neither names one. It returns
// the directory for messages.
func loadMigrationDir(cmd *cobra.Command, dir, configPath string) (*migrate.MigrationSet, string, error) {
	dir, err := migrationDir(cmd, dir, configPath)
	if err != nil {
		return nil, "", err
	}
	if dir == "" {
		return nil, "", usagef("--dir is required (or name the directory in the cluster file: migrations: ./migrations)")
	}
	set, err := migrate.LoadMigrationDir(dir)
	return set, dir, err
}

// migrateShardsFlag adds --shards, a subset of the logical shards.
func migrateShardsFlag(cmd *cobra.Command) *string {
	list := new(string)
	cmd.Flags().StringVar(list, "shards", "", "only these logical shards: ids and ranges, e.g. 5,7,10-20 (default: every shard)")
	return list
}

// shardsOf reads --shards against the cluster file: nil when it is not
// given (every shard); a list that does not parse, or names a shard the
// cluster does not have, is a usage error.
func shardsOf(cmd *cobra.Command, list string, cfg *shardmgr.Config) ([]int, error) {
	if !cmd.Flags().Changed("shards") {
		return nil, nil
	}
	ids, err := shardmgr.ParseShardList(list)
	if err != nil {
		return nil, usageError{fmt.Errorf("--shards: %w", err)}
	}
	if err := cfg.CheckShard(ids[len(ids)-1]); err != nil {
		return nil, usageError{fmt.Errorf("--shards: %w", err)}
	}
	return ids, nil
}

func migrateLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn + 1}))
}

func newMigrateRunCmd(dir migrate.Direction) *cobra.Command {
	var (
		to          int
		workers     int
		failFast    bool
		asJSON      bool
		lockTimeout time.Duration
	)
	cmd := &cobra.Command{Args: cobra.NoArgs}
	if dir == migrate.Up {
		cmd.Use = "up --dir DIR [--to-version N] [--shards LIST] [--fail-fast] [--workers N] [--lock-timeout D] [--json]"
		cmd.Short = "Apply migrations to every shard, up to the latest or to version N"
		cmd.Long = `Brings every logical shard on every host up to version N (default: the latest
in --dir). Hosts run in parallel, and on each host --workers shards at a time,
each under a lock of its own: a second run waits shard by shard (and says so)
instead of interleaving. Each migration runs in one transaction with its
version update, unless it says "---- tern: disable-tx ----".

A migration that fails rolls back on its shard; the others carry on (with
--fail-fast, the run stops early). The command then lists every shard that
stopped, at which version, with the database's error, records the failure
where 'shardid migrate status' shows it, and exits 1. Running it again after
the fix finishes the rest. Shards already past N are left alone.

--shards 5,7,10-20 migrates only those shards (ids and inclusive ranges); the
others are left as they are, and 'shardid migrate status' shows who is behind.

--lock-timeout 5s makes a migration that waits for a table lock (an ALTER TABLE
behind a long transaction, holding every writer of the table behind it) fail
on its shard after 5s instead; run up again later.`
	} else {
		cmd.Use = "down --to-version N --dir DIR [--shards LIST] [--fail-fast] [--workers N] [--lock-timeout D] [--json]"
		cmd.Short = "Undo migrations on every shard down to version N"
		cmd.Long = `Runs the down SQL of every migration above N on every logical shard, newest
first, with the same locking, transactions and failure handling as up.
--to-version is required (0 undoes everything). Shards already at or below N are left alone.
--shards 5,7,10-20 undoes migrations on those shards only.

  shardid migrate down --to-version 1 --dir shard-migrations             # undo what came after version 1
  shardid migrate down --to-version 0 --dir shard-migrations --shards 5  # shard 5 back to empty`
	}
	dirPath := migrateDirFlag(cmd)
	configPath := addClusterFlags(cmd)
	if dir == migrate.Up {
		cmd.Flags().IntVar(&to, "to-version", 0, "target version (default: the latest in --dir)")
	} else {
		cmd.Flags().IntVar(&to, "to-version", 0, "target version, required: undo every migration above it (0: all of them)")
	}
	deprecatedAlias(cmd, cmd.Flags(), "to-version", "to")
	shardList := migrateShardsFlag(cmd)
	cmd.Flags().IntVar(&workers, "workers", migrate.DefaultMigrateWorkers, "connections per host migrating shards in parallel")
	cmd.Flags().BoolVar(&failFast, "fail-fast", false, "stop at the first failure instead of carrying on with the other shards")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().DurationVar(&lockTimeout, "lock-timeout", 0, "fail a shard's migration that waits longer than this for a table lock (0: the server's lock_timeout)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if lockTimeout < 0 {
			return usagef("--lock-timeout must not be negative")
		}
		if dir == migrate.Down && !cmd.Flags().Changed("to-version") {
			return usagef("--to-version is required for down (0 undoes every migration)")
		}
		if to < 0 {
			return usagef("--to-version must not be negative")
		}
		if workers < 1 {
			return usagef("--workers must be at least 1")
		}
		set, dirName, err := loadMigrationDir(cmd, *dirPath, *configPath)
		if err != nil {
			return err
		}
		if to > set.Latest() {
			return usagef("--to-version %d: %s has %d migrations", to, dirName, set.Latest())
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		shards, err := shardsOf(cmd, *shardList, c.Config())
		if err != nil {
			return err
		}
		bars := newHostBars(os.Stderr, "migrate "+string(dir))
		res, err := migrate.Migrate(cmd.Context(), c, set, migrate.Options{
			Direction: dir, To: to, Shards: shards, Workers: workers, FailFast: failFast, LockTimeout: lockTimeout,
			Progress: bars.Update, Waiting: bars.Waiting, Logger: migrateLogger(),
		})
		bars.Done()
		if res == nil {
			return err
		}
		if asJSON {
			if werr := writeJSON(cmd.OutOrStdout(), res); werr != nil {
				return werr
			}
		} else {
			printMigrateResult(cmd.OutOrStdout(), res)
		}
		return err
	}
	return cmd
}

// printMigrateResult prints what a migrate run did: counts, then every
// shard that failed or was stopped. shardid init --dir prints the same.
func printMigrateResult(w io.Writer, res *migrate.Result) {
	changed, unchanged, failed, stopped := res.Counts()
	target := fmt.Sprintf("version %d", res.Target)
	if res.TargetName != "" {
		target += " (" + res.TargetName + ")"
	}
	applied := 0
	for _, s := range res.Shards {
		applied += s.Applied
	}
	fmt.Fprintf(w, "migrate %s to %s: %d shards in %.2fs\n", res.Direction, target, len(res.Shards), res.Elapsed.Seconds())
	fmt.Fprintf(w, "  migrated %d (%d migrations run), already there %d, failed %d", changed, applied, unchanged, failed)
	if stopped > 0 {
		fmt.Fprintf(w, ", stopped by --fail-fast %d", stopped)
	}
	fmt.Fprintln(w)
	if failed > 0 {
		fmt.Fprintln(w, "failed:")
		for _, s := range res.Shards {
			if s.Err != nil {
				fmt.Fprintf(w, "  %s\n", s.Err)
			}
		}
	}
	if stopped > 0 {
		fmt.Fprintln(w, "stopped by --fail-fast (run up again to finish):")
		var ids []int
		for _, s := range res.Shards {
			if s.Stopped {
				ids = append(ids, s.ID)
			}
		}
		fmt.Fprintf(w, "  shards %s\n", shardmgr.FormatShardList(ids))
	}
}

func newMigrateStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status --dir DIR [--shards LIST] [--json]",
		Short: "Show each shard's version, and which shards are behind or failed",
		Long: `Reads every shard's version and recorded failure from its host, and compares
them with the latest migration in --dir. Prints a summary (shards per version,
which are behind, which failed and why) and each shard's version as runs of
consecutive shards. --json prints
{"latest":N,"shards":[{"id":5,"host":"pg1","version":2}]}
where a shard with a recorded failure also has "failure":{...} and a shard
whose version could not be read has "version":-1 and "error". Exits 1 when
some shard could not be read. --shards 5,7,10-20 reads those shards only.`,
		Args: cobra.NoArgs,
	}
	dirPath := migrateDirFlag(cmd)
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	shardList := migrateShardsFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		set, _, err := loadMigrationDir(cmd, *dirPath, *configPath)
		if err != nil {
			return err
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		shards, err := shardsOf(cmd, *shardList, c.Config())
		if err != nil {
			return err
		}
		st, err := migrate.ReadMigrationStatusOf(cmd.Context(), c, set, shards)
		if err != nil {
			return err
		}
		if asJSON {
			err = writeJSON(cmd.OutOrStdout(), st)
		} else {
			printMigrationStatus(cmd.OutOrStdout(), set, st)
		}
		if err != nil {
			return err
		}
		if n := len(st.Summary().Unreadable); n > 0 {
			return fmt.Errorf("migrate status: the version of %d shards could not be read", n)
		}
		return nil
	}
	return cmd
}

func printMigrationStatus(w io.Writer, set *migrate.MigrationSet, st *migrate.MigrationStatus) {
	sum := st.Summary()
	hosts := map[string]bool{}
	byID := make(map[int]migrate.ShardVersion, len(st.Shards)) // st may hold a subset (--shards)
	for _, s := range st.Shards {
		hosts[s.Host] = true
		byID[s.ID] = s
	}
	latest := fmt.Sprintf("latest version %d", st.Latest)
	if name := set.Name(st.Latest); name != "" {
		latest += " (" + name + ")"
	}
	fmt.Fprintf(w, "%s; %d shards on %d hosts\n\n", latest, len(st.Shards), len(hosts))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSHARDS")
	vs := sum.Versions()
	for i := len(vs) - 1; i >= 0; i-- {
		fmt.Fprintf(tw, "%d\t%d\n", vs[i], sum.AtVersion[vs[i]])
	}
	if n := len(sum.Unreadable); n > 0 {
		fmt.Fprintf(tw, "unknown\t%d\n", n)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(sum.Behind) == 0 && len(sum.Failed) == 0 && len(sum.Ahead) == 0 && len(sum.Unreadable) == 0 {
		fmt.Fprintf(w, "every shard is at version %d\n\n", st.Latest)
	}
	if len(sum.Behind) > 0 {
		fmt.Fprintf(w, "behind (%d): shards %s\n", len(sum.Behind), shardmgr.FormatShardList(sum.Behind))
	}
	if len(sum.Ahead) > 0 {
		fmt.Fprintf(w, "ahead of --dir (%d): shards %s (is --dir out of date?)\n", len(sum.Ahead), shardmgr.FormatShardList(sum.Ahead))
	}
	if len(sum.Failed) > 0 {
		fmt.Fprintf(w, "failed (%d):\n", len(sum.Failed))
		for _, id := range sum.Failed {
			s := byID[id]
			f := s.Failure
			state := f.State
			if f.Partial {
				state += ", partly applied (ran without a transaction)"
			}
			code := ""
			if f.SQLState != "" {
				code = " (SQLSTATE " + f.SQLState + ")"
			}
			fmt.Fprintf(w, "  shard %d on %s at version %d: %s (%s) %s %s: %s%s\n", s.ID, s.Host, s.Version, f.Migration, f.Direction,
				state, f.At.UTC().Format(time.RFC3339), f.Message, code)
		}
	}
	if len(sum.Unreadable) > 0 {
		fmt.Fprintf(w, "unreadable (%d):\n", len(sum.Unreadable))
		for _, id := range sum.Unreadable {
			fmt.Fprintf(w, "  shard %d on %s: %s\n", id, byID[id].Host, errorWithHint(byID[id].Err))
		}
	}
	if len(sum.Behind)+len(sum.Failed)+len(sum.Ahead)+len(sum.Unreadable) > 0 {
		fmt.Fprintln(w)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARDS\tHOST\tVERSION")
	key := func(s migrate.ShardVersion) string {
		k := fmt.Sprintf("%s\t%d", s.Host, s.Version)
		if s.Version < 0 {
			k = s.Host + "\tunknown"
		}
		if s.Failure != nil {
			k += " (" + s.Failure.State + ")"
		}
		return k
	}
	for i := 0; i < len(st.Shards); {
		j := i
		for j+1 < len(st.Shards) && key(st.Shards[j+1]) == key(st.Shards[i]) && st.Shards[j+1].ID == st.Shards[j].ID+1 {
			j++
		}
		ids := fmt.Sprint(st.Shards[i].ID)
		if j > i {
			ids = fmt.Sprintf("%d-%d", st.Shards[i].ID, st.Shards[j].ID)
		}
		fmt.Fprintf(tw, "%s\t%s\n", ids, key(st.Shards[i]))
		i = j + 1
	}
	tw.Flush()
}

func newMigrateRenderCmd() *cobra.Command {
	var (
		shard  int
		schema string
		out    string
		format string
	)
	cmd := &cobra.Command{
		Use:   "render --shard N --dir DIR [--schema NAME] [--out DIR2] [--format tern|golang-migrate]",
		Short: "Print or write the SQL one shard would run",
		Long: `Renders every migration in --dir for logical shard N, as 'migrate up' would run
it there. Without --out it prints them. With --out it writes files into DIR2:
--format tern (default) writes NNN_name.sql files the plain tern CLI applies
(tern migrate --version-table shard_0005.schema_version); --format
golang-migrate writes NNN_name.up.sql and NNN_name.down.sql for golang-migrate's
migrate CLI, e.g.

  migrate -path DIR2 -database 'pgx5://user@host/app?x-migrations-table=%22shard_0005%22.%22schema_migrations%22&x-migrations-table-quoted=1' up

Nothing connects to a database, and no cluster file is needed: like 'shardid
sql function', it renders from --shard (0..8191) and --schema (default
shard_ plus the id padded to 4 digits). With a cluster file (--config,
SHARDID_CONFIG, or ./shardid.yaml when --schema is not given), --shard must be
one of its shards and the schema is the shard's own; --schema with --config or
SHARDID_CONFIG is refused. The epoch does not enter the rendered SQL (the
template values are {{.schema}}, {{.shard_id}} and {{.next_id}}).

  shardid migrate render --shard 5 --dir shard-migrations
  shardid migrate render --shard 5 --schema likes_5 --dir shard-migrations`,
		Args: cobra.NoArgs,
	}
	dirPath := migrateDirFlag(cmd)
	configPath := addClusterFlags(cmd)
	cmd.Flags().IntVar(&shard, "shard", 0, "logical shard id")
	cmd.Flags().StringVar(&schema, "schema", "", "schema to render for, without a cluster file (default shard_ plus the id padded to 4 digits)")
	cmd.Flags().StringVar(&out, "out", "", "write files into this directory instead of printing")
	cmd.Flags().StringVar(&format, "format", migrate.FormatTern, "file format with --out: tern or golang-migrate")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed("shard") {
			return usagef("--shard is required")
		}
		if format != migrate.FormatTern && format != migrate.FormatGolangMigrate {
			return usagef("--format %q: want tern or golang-migrate", format)
		}
		withCluster := cmd.Flags().Changed("config") || os.Getenv("SHARDID_CONFIG") != ""
		if !withCluster && !cmd.Flags().Changed("schema") {
			if _, err := os.Stat(*configPath); err == nil {
				withCluster = true
			}
		}
		switch {
		case withCluster && cmd.Flags().Changed("schema"):
			return usagef("--schema renders outside a cluster, and --config (or SHARDID_CONFIG) names one whose shards live in their default schemas: drop one of them")
		case withCluster:
			c, err := openCluster(cmd, *configPath) // checks the file; connects to nothing
			if err != nil {
				return err
			}
			defer c.Close()
			cfg := c.Config()
			if err := cfg.CheckShard(shard); err != nil {
				return err
			}
		case shard < 0 || shard >= shardmgr.MaxShards:
			return usagef("--shard %d: shards are 0..%d", shard, shardmgr.MaxShards-1)
		}
		if schema == "" {
			schema = shsql.DefaultSchema(shard)
		}
		if err := shsql.CheckSchema(schema); err != nil {
			return usageError{fmt.Errorf("--schema: %w", err)}
		}
		dirConfig := "" // without a cluster, only --dir names the migrations
		if withCluster {
			dirConfig = *configPath
		}
		set, _, err := loadMigrationDir(cmd, *dirPath, dirConfig)
		if err != nil {
			return err
		}
		migs, err := set.Render(shard, schema)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if out == "" {
			for i, m := range migs {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "-- %s (version %d), up:\n%s\n", m.Name, m.Version, m.Up)
				if m.Down != "" {
					fmt.Fprintf(w, "-- %s (version %d), down:\n%s\n", m.Name, m.Version, m.Down)
				}
			}
			return nil
		}
		paths, err := migrate.WriteRendered(out, format, migs)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(w, p)
		}
		return nil
	}
	return cmd
}

func newMigrateGeneratorCmd() *cobra.Command {
	var (
		workers     int
		dryRun      bool
		asJSON      bool
		lockTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "generator [--dry-run] [--workers N] [--json]",
		Short: "Upgrade the id generator in every shard to this release's, never resetting a counter",
		Long: `Re-installs this release's generator (the one 'shardid sql function' prints)
in every shard whose installed version or variant differs, e.g. after
upgrading shardid, or to replace Instagram's original function. Per shard, in
one transaction: writes to the tables whose id column defaults to the shard's
next_id() are held, the highest id stored there is read, the generator is
replaced and its counter carried past that id, so every id after the upgrade
is greater than every id before. A generator for another shard, epoch or
layout is refused. Shards already current are left alone.`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().IntVar(&workers, "workers", migrate.DefaultMigrateWorkers, "connections per host upgrading shards in parallel")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be upgraded, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().DurationVar(&lockTimeout, "lock-timeout", migrate.DefaultGeneratorLockTimeout, "longest wait for the write lock on a shard's tables")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if workers < 1 {
			return usagef("--workers must be at least 1")
		}
		if lockTimeout <= 0 {
			return usagef("--lock-timeout must be positive")
		}
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		bars := newHostBars(os.Stderr, "generator")
		res, err := migrate.UpgradeGenerators(cmd.Context(), c, migrate.GeneratorOptions{
			Workers: workers, DryRun: dryRun, LockTimeout: lockTimeout,
			Progress: bars.Update, Waiting: bars.Waiting, Logger: migrateLogger(),
		})
		bars.Done()
		if res == nil {
			return err
		}
		w := cmd.OutOrStdout()
		if asJSON {
			if werr := writeJSON(w, res); werr != nil {
				return werr
			}
			return err
		}
		up, unchanged, failed := res.Counts()
		verb := "upgraded"
		if dryRun {
			verb = "would upgrade"
		}
		fmt.Fprintf(w, "generator: %s %d shards, %d already current, %d failed (%.2fs)\n", verb, up, unchanged, failed, res.Elapsed.Seconds())
		for _, s := range res.Shards {
			switch {
			case s.Err != nil:
				fmt.Fprintf(w, "  shard %d on %s: failed: %s\n", s.ID, s.Host, s.Err)
			case s.Upgraded:
				fmt.Fprintf(w, "  shard %d on %s: %q -> %q", s.ID, s.Host, s.From, s.To)
				if s.MaxID > 0 {
					fmt.Fprintf(w, "; counter carried past %d (%s)", s.MaxID, strings.Join(s.Columns, ", "))
				}
				fmt.Fprintln(w)
			}
		}
		return err
	}
	return cmd
}

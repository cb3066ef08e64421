package install

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

// DefaultWorkers is how many connections per host install shards in
// parallel unless InitOptions.Workers says.
const DefaultWorkers = 4

// InitOptions adjust Init. The zero value is fine.
type InitOptions struct {
	// Progress, when set, is called after each shard is checked or
	// installed, with the number done so far and the total. Calls are
	// serialised.
	Progress func(done, total int)
	// Workers is the number of connections per host that install shards
	// in parallel. Zero means DefaultWorkers (4).
	Workers int
	// Logger receives progress messages. Zero means the handle's logger
	// (cluster.WithLogger).
	Logger *slog.Logger
	// Migrations, when set, brings every shard to the migration version
	// of the others after installing (Shards), so that a shard Init
	// created again gets the tables the rest have. Migrate adjusts that run
	// (its Workers, when zero, are Workers).
	Migrations *migrate.MigrationSet
	Migrate    migrate.Options
	// LockWait bounds the wait for another init of the same catalog (the
	// catalog's init lock): when it runs out Init gives up, naming the
	// session that holds the lock. Zero means DefaultInitLockWait (5m).
	LockWait time.Duration
}

// DefaultInitLockWait is how long Init waits, by default, for another
// init of the same catalog to finish.
const DefaultInitLockWait = 5 * time.Minute

// InitResult is what Init did.
type InitResult struct {
	// Cluster is the cluster's name; Generation the catalog's generation
	// after the run.
	Cluster    string `json:"cluster"`
	Generation int64  `json:"generation"`
	// CreatedDatabases lists the databases Init created, as host:port/name.
	CreatedDatabases []string `json:"created_databases"`
	// CatalogCreated is true when this run created the cluster record.
	CatalogCreated bool `json:"catalog_created"`
	// CatalogUpgrade is the catalog's schema upgrade this run made, nil
	// when it created the catalog or found it up to date.
	CatalogUpgrade *SchemaUpgrade `json:"catalog_upgrade,omitempty"`
	// CatalogChanges describes the catalog changes this run made.
	CatalogChanges []string `json:"catalog_changes"`
	// Installed counts the shards whose generator or host record this run
	// installed; Unchanged those that were already right.
	Installed int `json:"installed"`
	Unchanged int `json:"unchanged"`
	// Elapsed is the run's wall time (JSON: seconds).
	Elapsed time.Duration `json:"-"`
	// Migrated is the migration run, when InitOptions.Migrations was set.
	Migrated *migrate.Result `json:"migrations,omitempty"`
	// Warnings are what Init found unsafe but left as it was, one line
	// each: a catalog database that every role may connect to.
	Warnings []string `json:"warnings"`
}

// MarshalJSON writes the lists as [] when empty and Elapsed in seconds.
func (r InitResult) MarshalJSON() ([]byte, error) {
	type plain InitResult
	p := plain(r)
	if p.CreatedDatabases == nil {
		p.CreatedDatabases = []string{}
	}
	if p.CatalogChanges == nil {
		p.CatalogChanges = []string{}
	}
	if p.Warnings == nil {
		p.Warnings = []string{}
	}
	return json.Marshal(struct {
		plain
		Seconds float64 `json:"seconds"`
	}{p, r.Elapsed.Seconds()})
}

// Changed reports whether Init changed anything.
func (r *InitResult) Changed() bool {
	return len(r.CreatedDatabases) > 0 || r.CatalogCreated || r.CatalogUpgrade != nil || len(r.CatalogChanges) > 0 || r.Installed > 0
}

// Init creates or completes the cluster described by cfg: the databases
// named in the DSNs when missing, the catalog (migrations, cluster, hosts,
// the balanced contiguous map of shards to hosts), every host's record and
// every shard's schema and generator on its host, in parallel per host.
//
// Running it again is safe: it finishes what is missing and changes
// nothing that is already right. On shards whose generator it finds, it
// runs this release's install SQL again (which re-applies the generator's
// privileges, repairing any changed by hand) and upgrades an older
// generator version to this release's, carrying the counter past the ids
// stored (migrate.UpgradeGenerators). It never replaces a generator whose
// marker names another variant, shard, epoch or layout, nor a newer
// version, and it refuses a cluster
// file that contradicts the catalog on what is fixed once initialised
// (cluster name, shard count, epoch) with an error wrapping
// ErrClusterMismatch.
func Init(ctx context.Context, c *cluster.Cluster, opts InitOptions) (*InitResult, error) {
	start := time.Now()
	cfg := c.Config()
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	log := opts.Logger
	if log == nil {
		log = c.Logger()
	}
	res := &InitResult{Cluster: cfg.Cluster}

	// No operator DSN may be a connection pooler: refused before a
	// database is created or a DSN recorded.
	if err := refusePoolers(ctx, c); err != nil {
		return nil, err
	}

	// Nothing is written to a catalog or host that a newer shardid
	// migrated, or whose last migration failed half way.
	if err := c.Need(2, "init"); err != nil {
		return nil, err
	}
	// Nor to one whose toolkit schemas another role made: before even
	// reading them (a planted view's functions would run as this role).
	if err := checkTrust(ctx, c); err != nil {
		return nil, err
	}
	if err := checkSchemas(ctx, c); err != nil {
		return nil, err
	}
	warnings, err := checkGenerators(ctx, c)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, warnings...)

	// A catalog that cannot be the hosts' own (a mistyped address, one
	// emptied by a failed restore, another cluster's) is refused before
	// anything is created.
	if err := checkCatalogOwnsHosts(ctx, c); err != nil {
		return nil, err
	}

	// Databases first: the catalog and every host.
	dbs, err := ensureDatabases(ctx, c, log)
	if err != nil {
		return nil, err
	}
	res.CreatedDatabases = dbs

	// Every host is checked before the catalog records anything: two
	// names for one database would leave a map that no command could
	// repair (a database that belongs to another cluster or host was
	// refused above, before anything was created).
	if err := checkHostsDistinct(ctx, c); err != nil {
		return nil, err
	}

	// One init at a time per catalog: a second manager waits, then finds
	// everything done. The lock is the session's, so it goes with a crash.
	lock, err := c.CatalogConn(ctx, cluster.Session{})
	if err != nil {
		return nil, err
	}
	defer lock.Close(context.WithoutCancel(ctx))
	if err := waitInitLock(ctx, lock, opts.LockWait, log); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if res.CatalogUpgrade, err = upgradeCatalog(ctx, c, lock); err != nil {
		return nil, err
	}
	if w, err := publicCatalogWarning(ctx, lock); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	} else if w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	catalog, err := c.CatalogPool(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkNotStale(ctx, c, catalog); err != nil {
		return nil, err
	}
	m, created, changes, err := planCatalog(ctx, catalog, cfg)
	if err != nil {
		return nil, err
	}
	res.CatalogCreated, res.CatalogChanges, res.Generation = created, changes, m.Generation
	for _, c := range changes {
		log.Info("catalog", "change", c, "generation", m.Generation)
	}

	identity, err := readClusterIdentity(ctx, catalog)
	if err != nil {
		return nil, fmt.Errorf("catalog: read the cluster identity: %w", err)
	}
	failures, present, err := installShards(ctx, c, m, identity, opts, res)
	if err != nil {
		return nil, err
	}
	if len(failures) == 0 && len(present) > 0 {
		failures, err = upgradeGenerators(ctx, c, present, opts, log, res)
		if err != nil && len(failures) == 0 {
			return nil, err
		}
	}
	if len(failures) == 0 {
		w, err := recordServerIdentities(ctx, c, catalog)
		if err != nil {
			return nil, err
		}
		res.Warnings = append(res.Warnings, w...)
	}
	if len(failures) > 0 {
		sort.Slice(failures, func(i, j int) bool { return failures[i].Error() < failures[j].Error() })
		return res, &shardmgr.ShardErrors{Op: "init", Total: len(m.Shards), Errs: failures}
	}
	if opts.Migrations != nil {
		if opts.Migrate.Workers == 0 {
			opts.Migrate.Workers = opts.Workers
		}
		res.Migrated, err = migrate.Shards(ctx, c, opts.Migrations, nil, opts.Migrate)
	}
	res.Elapsed = time.Since(start)
	return res, err
}

// publicCatalogWarning says so when every role may connect to the
// catalog database: any of them could then hold the catalog's advisory
// locks (the writer's, init's) and make moves and init wait.
func publicCatalogWarning(ctx context.Context, conn *pgx.Conn) (string, error) {
	db := conn.Config().Database
	open, err := pgdatabase.PublicCanConnect(ctx, conn, db)
	if err != nil || !open {
		return "", err
	}
	return fmt.Sprintf("every role may connect to the catalog database %s (PUBLIC has CONNECT), and any role that connects can hold the catalog's locks and stall moves and init: "+
		"REVOKE CONNECT ON DATABASE %s FROM PUBLIC, then GRANT CONNECT to the roles that route or manage (docs/shardmgr.md)",
		db, pgx.Identifier{db}.Sanitize()), nil
}

// upgradeCatalog migrates the catalog to this binary's schema under the
// init lock held on conn, checking its version again first: another
// manager may have migrated it since checkSchemas. It returns the upgrade
// of a catalog that had a schema, nil for a new one or one up to date.
func upgradeCatalog(ctx context.Context, c *cluster.Cluster, conn *pgx.Conn) (*SchemaUpgrade, error) {
	v, err := shardmgr.ReadCatalogVersion(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := initAccepts(v); err != nil {
		return nil, err
	}
	mc, err := c.CatalogConnConfig(cluster.Session{})
	if err != nil {
		return nil, err
	}
	if err := migrations.UpConfig(ctx, mc, migrations.Catalog, migrations.WithLogger(c.Logger())); err != nil {
		return nil, err
	}
	if v.Have == 0 || v.Have == shardmgr.CatalogSchema {
		return nil, nil
	}
	return &SchemaUpgrade{From: v.Have, To: shardmgr.CatalogSchema}, nil
}

// ensureDatabases creates the databases the cluster file names (the
// catalog's and every host's) that do not exist yet, and returns them as
// host:port/name. It connects through the handle, within its budget.
func ensureDatabases(ctx context.Context, c *cluster.Cluster, log *slog.Logger) ([]string, error) {
	cfg := c.Config()
	var out []string
	type db struct{ name, dsn string } // name "" for the catalog
	dbs := []db{{"", cfg.Catalog}}
	for _, h := range cfg.Hosts {
		dbs = append(dbs, db{h.Name, h.DSN})
	}
	seen := map[string]bool{}
	for _, d := range dbs {
		key, _ := pg.DatabaseKey(d.dsn)
		if seen[key] {
			continue
		}
		seen[key] = true
		var cc *pgx.ConnConfig
		var err error
		if d.name == "" {
			cc, err = c.CatalogConnConfig(cluster.Session{})
		} else {
			cc, err = c.HostConnConfig(d.name, cluster.Session{})
		}
		if err != nil {
			return nil, err
		}
		created, err := pgdatabase.EnsureConfig(ctx, cc)
		if err != nil {
			return nil, err
		}
		if created {
			log.Info("created database", "database", key)
			out = append(out, key)
		}
	}
	return out, nil
}

// installShards installs every host's record and shards, hosts in
// parallel, counting in res what it installed and what was right, and
// returns the shards that failed and those whose generator it found
// already there (which upgradeGenerators brings to this release's). A
// host that fails as a whole (its record, its connection) fails its own
// shards only: the other hosts finish, and the failure is reported with
// the rest at the end. Only the context's end is the error.
func installShards(ctx context.Context, c *cluster.Cluster, m *shardmgr.ShardMap, identity string, opts InitOptions, res *InitResult) (failures []error, present []int, err error) {
	var (
		mu   sync.Mutex
		done int
	)
	progress := func(id int, found, installed bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		done++
		if found && err == nil {
			present = append(present, id)
		}
		switch {
		case err != nil:
			failures = append(failures, err)
		case installed:
			res.Installed++
		default:
			res.Unchanged++
		}
		if opts.Progress != nil {
			opts.Progress(done, len(m.Shards))
		}
	}
	var wg sync.WaitGroup
	for _, h := range c.Config().Hosts {
		wg.Go(func() {
			if err := installHost(ctx, c, m, h, identity, opts.Workers, progress); err != nil && ctx.Err() == nil {
				mu.Lock()
				defer mu.Unlock()
				for _, id := range m.ShardsOn(h.Name) {
					failures = append(failures, &shardmgr.ShardError{Shard: id, Host: h.Name, Err: err})
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return failures, present, nil
}

// installHost writes host h's record and installs the generators of the
// shards the map places on it, with workers connections. Per-shard
// failures go to progress; host-wide ones are returned.
func installHost(ctx context.Context, c *cluster.Cluster, m *shardmgr.ShardMap, h shardmgr.Host, identity string, workers int, progress func(id int, present, installed bool, err error)) error {
	mine := m.ShardsOn(h.Name)
	mc, err := c.HostConnConfig(h.Name, cluster.Session{})
	if err != nil {
		return err
	}
	if err := migrations.UpConfig(ctx, mc, migrations.Host, migrations.WithLogger(c.Logger())); err != nil {
		return pg.OnHost(h.Name, err)
	}
	cfg := c.Config()
	pool, err := c.HostPool(ctx, h.Name, cluster.Session{})
	if err != nil {
		return err
	}

	var cluster, name string
	err = pool.QueryRow(ctx, `INSERT INTO shardid.host_info (cluster, host) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET id = true RETURNING cluster, host`, cfg.Cluster, h.Name).Scan(&cluster, &name)
	if err != nil {
		return fmt.Errorf("host %s: record: %w", h.Name, err)
	}
	if cluster != cfg.Cluster || name != h.Name {
		return fmt.Errorf("host %s: %w: its database belongs to cluster %q as host %q", h.Name, shardmgr.ErrClusterMismatch, cluster, name)
	}
	catPool, err := c.CatalogPool(ctx)
	if err != nil {
		return err
	}
	if err := recordHostIdentity(ctx, pool, catPool, h.Name, identity); err != nil {
		return pg.OnHost(h.Name, err)
	}

	if err := ensureExtension(ctx, pool, cfg.Generator); err != nil {
		return pg.OnHost(h.Name, err)
	}
	// The shard schemas the map places here, by the map's names: none
	// may be one another role made (checkTrust saw the default names).
	schemas := make([]string, 0, len(mine))
	for _, id := range mine {
		schemas = append(schemas, m.Shards[id].Schema)
	}
	if err := shardschema.CheckTrusted(ctx, pool, schemas...); err != nil {
		return pg.OnHost(h.Name, err)
	}
	markers, err := shardschema.ReadMarkers(ctx, pool)
	if err != nil {
		return pg.OnHost(h.Name, err)
	}
	recorded := map[int]bool{}
	rows, err := pool.Query(ctx, `SELECT shard FROM shardid.local_shards WHERE state <> 'fenced'`)
	if err != nil {
		return pg.OnHost(h.Name, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return pg.OnHost(h.Name, err)
	}
	for _, id := range ids {
		recorded[id] = true
	}

	work := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	for range workers {
		g.Go(func() error {
			for id := range work {
				marker, present := markers[m.Shards[id].Schema]
				installed, err := installShard(gctx, pool, m, id, cfg.Generator, present, marker, recorded[id])
				if err != nil {
					err = &shardmgr.ShardError{Shard: id, Host: h.Name, Err: err}
				}
				progress(id, present, installed, err)
			}
			return nil
		})
	}
	for _, id := range mine {
		select {
		case work <- id:
		case <-ctx.Done():
		}
	}
	close(work)
	_ = g.Wait()
	return ctx.Err()
}

// installShard installs shard id's generator and host record unless both
// are already right. A generator with a different marker is left alone,
// but for an older version of the same generator (same variant, shard,
// epoch and layout), which Init then upgrades (upgradeGenerators).
func installShard(ctx context.Context, pool *pgxpool.Pool, m *shardmgr.ShardMap, id int, generator string, present bool, marker string, recorded bool) (bool, error) {
	p := catalog.GeneratorParams(m, id)
	p.Generator = generator
	want, err := shsql.Marker(p)
	if err != nil {
		return false, err
	}
	if present && marker != want {
		if err := olderVersionOf(marker, want); err != nil {
			return false, err
		}
	}
	if present && recorded {
		return false, nil
	}
	ddl, err := shsql.Render(p)
	if err != nil {
		return false, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if !present {
			if _, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
		}
		return shardschema.RecordLocalShard(ctx, tx, id, p.Schema, string(m.Shards[id].State), m.Generation)
	})
	if err != nil {
		return false, err
	}
	return true, nil
}

// olderVersionOf is nil when marker names an older version of the
// generator want names: what init upgrades. Anything else is refused: a
// newer version (ErrGeneratorTooNew), another variant, shard, epoch or
// layout, or no marker (ErrForeignGenerator).
func olderVersionOf(marker, want string) error {
	have, haveVersion, err := shsql.ParseMarker(marker)
	if err == nil {
		wantP, _, _ := shsql.ParseMarker(want)
		switch {
		case haveVersion > shsql.Version:
			return fmt.Errorf("%w: generator v%d (marker %q); this binary writes v%d", migrate.ErrGeneratorTooNew, haveVersion, marker, shsql.Version)
		case have == wantP && haveVersion < shsql.Version:
			return nil
		}
	}
	return fmt.Errorf("%w: a different generator is already installed (marker %q, want %q); init does not replace it", migrate.ErrForeignGenerator, marker, want)
}

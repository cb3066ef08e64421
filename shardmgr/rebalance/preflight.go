package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// The preflight: before a plan, an apply or a move changes anything (the
// catalog, a host, the journal), it reads from every source and target
// what online moves need of the servers and says, per host, what is
// missing and how to get it. An online move that started on a server
// that cannot run it fails half-way (wal_level), or waits for a worker
// slot that never comes free; both leave partial copies behind.

// Role is a host's part in the moves a check is about.
type Role string

// The parts a host plays in a move.
const (
	RoleSource Role = "source"
	RoleTarget Role = "target"
)

// Settings and properties a check looks at (Check.Setting).
const (
	CheckWALLevel        = "wal_level"
	CheckSlots           = "max_replication_slots"
	CheckSenders         = "max_wal_senders"
	CheckWorkers         = "max_logical_replication_workers"
	CheckWorkerProcesses = "max_worker_processes"
	CheckPublish         = "publish"          // the role may create publications and logical slots
	CheckSubscribe       = "subscribe"        // the role may create subscriptions
	CheckReplicaIdentity = "replica identity" // a primary key or replica identity on every table
	CheckLogged          = "logged"           // no unlogged table (logical replication publishes none)
	CheckMovable         = "movable"          // every table can be carried (any mode): copy_tables.go
)

// Check is one preflight finding: on Host, in its Role, Setting has Value
// and the moves (of Shards) need Need. JSON has the fields below.
type Check struct {
	Host    string `json:"host"`
	Role    Role   `json:"role"`
	Setting string `json:"setting"`
	Value   string `json:"value"`
	Need    string `json:"need"`
	OK      bool   `json:"ok"`
	// Shards are the shards of the moves the check is about.
	Shards []int `json:"shards,omitempty"`
	// Fix is how to get past a failed check.
	Fix *Fix `json:"fix,omitempty"`
}

// Fix is how to get past a failed check: any one of its ways.
type Fix struct {
	// Offline: moving the shards offline (or in auto mode) needs none of
	// this.
	Offline bool `json:"offline,omitempty"`
	// SQL fixes the server (ALTER SYSTEM, ALTER ROLE, GRANT, ALTER TABLE).
	SQL string `json:"sql,omitempty"`
	// Restart: SQL takes effect only after the server restarts (else a
	// reload, SELECT pg_reload_conf(), is enough, or nothing).
	Restart bool `json:"restart,omitempty"`
	// Migrations: give the migrations the shards were migrated with (all
	// of them, up to the shards' version).
	Migrations bool `json:"migrations,omitempty"`
	// Tables: make the tables the check names with a migration (one
	// that creates them IF NOT EXISTS, run on every shard), or move them
	// out of the shard's schema.
	Tables bool `json:"tables,omitempty"`
}

func (c Check) String() string {
	s := fmt.Sprintf("%s (%s): %s is %s, need %s", c.Host, c.Role, c.Setting, c.Value, c.Need)
	if c.Setting == CheckReplicaIdentity || c.Setting == CheckMovable || c.Setting == CheckMigrations || c.Setting == CheckShardTables {
		s += fmt.Sprintf(" (shards %v)", c.Shards)
	}
	return s
}

// PreflightError is a preflight that failed: the operation was refused
// before anything changed. It wraps ErrPreflight, ErrNoReplicaIdentity
// when a table lacks a key, and ErrUnmovable when a table cannot be
// carried at all.
type PreflightError struct {
	Failed []Check
}

func (e *PreflightError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, c := range e.Failed {
		parts[i] = c.String()
	}
	n := "1 check"
	if len(e.Failed) != 1 {
		n = fmt.Sprintf("%d checks", len(e.Failed))
	}
	return fmt.Sprintf("%s: %s failed, nothing changed: %s", ErrPreflight, n, strings.Join(parts, "; "))
}

func (e *PreflightError) Unwrap() []error {
	out := append([]error{ErrPreflight}, schemaErrors(e.Failed)...)
	for _, c := range e.Failed {
		switch c.Setting {
		case CheckReplicaIdentity:
			if !slices.Contains(out, ErrNoReplicaIdentity) {
				out = append(out, ErrNoReplicaIdentity)
			}
		case CheckMovable:
			if !slices.Contains(out, ErrUnmovable) {
				out = append(out, ErrUnmovable)
			}
		}
	}
	return out
}

// failedChecks is the checks that failed, nil when none.
func failedChecks(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// preflightError is the error of checks, nil when all passed.
func preflightError(checks []Check) error {
	if f := failedChecks(checks); len(f) > 0 {
		return &PreflightError{Failed: f}
	}
	return nil
}

// hostFacts is what the preflight reads from one host.
type hostFacts struct {
	walLevel                     string
	maxSlots, usedSlots          int
	maxSenders, usedSenders      int
	maxWorkers, usedWorkers      int
	maxProcesses, usedProcesses  int
	version                      int
	role, database               string
	super, replication, createDB bool
	createSubscription           bool
	noIdentity                   map[string][]string // schema -> tables without a key
	unlogged                     map[string][]string // schema -> unlogged tables
}

// readHostFacts reads a host's settings and what is in use, leaving out
// the slots and subscriptions named ours (the moves being resumed hold
// them already). Logical workers in use are the running ones plus the
// enabled subscriptions still waiting for one, which take one as soon as
// a slot frees. Background workers in use are every process that is not
// a client or one of the server's own (the launcher and the logical
// workers count against max_worker_processes, autovacuum does not).
func readHostFacts(ctx context.Context, db shardmgr.Querier, ours []string, schemas []string) (*hostFacts, error) {
	f := &hostFacts{}
	if ours == nil {
		ours = []string{}
	}
	err := db.QueryRow(ctx, `SELECT current_setting('wal_level'),
			current_setting('max_replication_slots')::int,
			(SELECT count(*) FROM pg_catalog.pg_replication_slots WHERE NOT (slot_name = ANY($1)))::int,
			current_setting('max_wal_senders')::int,
			(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender')::int,
			current_setting('max_logical_replication_workers')::int,
			((SELECT count(*) FROM pg_catalog.pg_stat_subscription WHERE pid IS NOT NULL AND NOT (subname = ANY($1)))
			 + (SELECT count(*) FROM pg_catalog.pg_subscription s WHERE s.subenabled AND NOT (s.subname = ANY($1))
				AND NOT EXISTS (SELECT FROM pg_catalog.pg_stat_subscription st WHERE st.subid = s.oid AND st.relid IS NULL AND st.pid IS NOT NULL)))::int,
			current_setting('max_worker_processes')::int,
			((SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type NOT IN ('client backend', 'autovacuum launcher',
				'autovacuum worker', 'background writer', 'checkpointer', 'walwriter', 'walsender', 'walreceiver', 'archiver',
				'startup', 'logger', 'standalone backend', 'io worker', 'slotsync worker', 'walsummarizer'))
			 - (SELECT count(*) FROM pg_catalog.pg_stat_subscription WHERE pid IS NOT NULL AND subname = ANY($1))
			 + (SELECT count(*) FROM pg_catalog.pg_subscription s WHERE s.subenabled AND NOT (s.subname = ANY($1))
				AND NOT EXISTS (SELECT FROM pg_catalog.pg_stat_subscription st WHERE st.subid = s.oid AND st.relid IS NULL AND st.pid IS NOT NULL)))::int,
			current_setting('server_version_num')::int,
			current_user, current_database(), r.rolsuper, r.rolreplication,
			pg_catalog.has_database_privilege(current_database(), 'CREATE'),
			EXISTS (SELECT FROM pg_catalog.pg_roles g WHERE g.rolname = 'pg_create_subscription'
				AND pg_catalog.pg_has_role(current_user, g.oid, 'MEMBER'))
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`, ours).Scan(
		&f.walLevel, &f.maxSlots, &f.usedSlots, &f.maxSenders, &f.usedSenders, &f.maxWorkers, &f.usedWorkers,
		&f.maxProcesses, &f.usedProcesses, &f.version, &f.role, &f.database, &f.super, &f.replication, &f.createDB, &f.createSubscription)
	if err != nil {
		return nil, err
	}
	if len(schemas) > 0 {
		if f.noIdentity, err = tablesWithoutIdentity(ctx, db, schemas, nil); err != nil {
			return nil, err
		}
		if f.unlogged, err = unloggedTables(ctx, db, schemas); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func isMissingDatabase(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.InvalidCatalogName
}

// readNewHostFacts reads the facts of a host whose database does not
// exist yet (registering the host creates it, owned by the role, which
// then has CREATE on it): through the postgres database of its server,
// as the settings and what is in use are the server's.
func readNewHostFacts(ctx context.Context, c *cluster.Cluster, host string, ours []string) (*hostFacts, error) {
	cc, err := c.HostConnConfig(host, cluster.Session{})
	if err != nil {
		return nil, err
	}
	cc.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, pg.ServerFirst(fmt.Errorf("its database is missing and the server's postgres database is unreachable: %w", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	f, err := readHostFacts(ctx, conn, ours, nil)
	if err != nil {
		return nil, err
	}
	f.createDB = true
	return f, nil
}

// tablesWithoutIdentity lists, per schema of schemas, the tables (of
// only, when not nil; never the migration bookkeeping) that logical
// replication cannot follow: no primary key and no replica identity. Only
// tables holding rows count, the leaves of a partitioned table each on
// its own (a move publishes those, and PostgreSQL asks the identity of
// each leaf, whatever its parent has). The preflight and the move's own
// check before it publishes share it.
func tablesWithoutIdentity(ctx context.Context, q shardmgr.Querier, schemas, only []string) (map[string][]string, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind = 'r' AND ($2::text[] IS NULL OR c.relname = ANY($2))
		  AND c.relname <> ALL($3)
		  AND NOT (c.relreplident = 'f'
		   OR (c.relreplident = 'd' AND EXISTS (SELECT FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
		   OR (c.relreplident = 'i' AND EXISTS (SELECT FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)))
		ORDER BY 1, 2`, schemas, only, []string{migrate.VersionTable, migrate.FailureTable})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	var schema, table string
	_, err = pgx.ForEachRow(rows, []any{&schema, &table}, func() error {
		out[schema] = append(out[schema], table)
		return nil
	})
	return out, err
}

// unloggedTables lists, per schema of schemas, its unlogged tables:
// logical replication cannot publish them (CREATE PUBLICATION refuses
// them), so only an offline move carries them.
func unloggedTables(ctx context.Context, q shardmgr.Querier, schemas []string) (map[string][]string, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'p') AND c.relpersistence = 'u'
		ORDER BY n.nspname, c.relname COLLATE "C"`, schemas)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	var schema, table string
	_, err = pgx.ForEachRow(rows, []any{&schema, &table}, func() error {
		out[schema] = append(out[schema], table)
		return nil
	})
	return out, err
}

// Online moves run in batches: the moves from one source to one target
// share one replication slot and WAL sender on the source and one
// subscription, so one logical replication worker, on the target (the
// copy is shardid's, so no table-sync workers). A target runs its batches
// in waves of the workers it has free, so one free worker is enough for
// any number of moves; a source serves every batch of a wave at once, so
// it needs a slot and a sender per target its moves go to.

// batchesFrom is how many batches moves make: one per source and target.
func batchesFrom(moves []preflightMove) int {
	pairs := map[[2]string]bool{}
	for _, m := range moves {
		pairs[[2]string{m.From, m.To}] = true
	}
	return len(pairs)
}

// preflightMove is a move the preflight looks at.
type preflightMove struct {
	Shard    int
	From, To string
	Schema   string
	Mode     MoveMode // online, offline or auto
	replName string   // a resumed move's, whose objects are already in place
}

// preflightResult is what runPreflight found: the checks, and for moves
// in auto mode the mode chosen and why.
type preflightResult struct {
	Checks []Check
	// Modes are the modes chosen per shard, and Reasons why a move in auto
	// mode goes offline.
	Modes   map[int]MoveMode
	Reasons map[int]string
}

// runPreflight checks the hosts of moves for their online moves, with
// parallel moves at once. Moves in auto mode go online where they can and
// offline, with the reason, where they cannot; the checks are then made
// for the moves that stay online.
func runPreflight(ctx context.Context, c *cluster.Cluster, poolOf func(context.Context, string) (*pgxpool.Pool, error), moves []preflightMove, parallel int) (*preflightResult, error) {
	parallel = max(parallel, 1)
	cfg := c.Config()
	res := &preflightResult{Modes: map[int]MoveMode{}, Reasons: map[int]string{}}
	schemasOn := map[string][]string{}
	oursOn := map[string][]string{}
	var hosts []string
	for _, m := range moves {
		if m.Mode == MoveOffline {
			res.Modes[m.Shard] = MoveOffline
			continue
		}
		for _, h := range []string{m.From, m.To} {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
			if m.replName != "" {
				oursOn[h] = append(oursOn[h], m.replName)
			}
		}
		schemasOn[m.From] = append(schemasOn[m.From], m.Schema)
	}
	facts := make(map[string]*hostFacts, len(hosts))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, h := range hosts {
		g.Go(func() error {
			var f *hostFacts
			db, err := poolOf(gctx, h)
			if err == nil {
				f, err = readHostFacts(gctx, db, oursOn[h], schemasOn[h])
			}
			if _, ok := cfg.Host(h); ok && isMissingDatabase(err) && len(schemasOn[h]) == 0 {
				f, err = readNewHostFacts(gctx, c, h, oursOn[h])
			}
			if err != nil {
				return fmt.Errorf("preflight: host %s: %w", h, err)
			}
			mu.Lock()
			facts[h] = f
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	// Auto: offline where not even one online move could run.
	for _, m := range moves {
		if m.Mode != MoveAuto {
			continue
		}
		if why := onlineImpossible(facts[m.From], facts[m.To], m); why != "" {
			res.Modes[m.Shard] = MoveOffline
			res.Reasons[m.Shard] = why
		}
	}
	var online []preflightMove
	for _, m := range moves {
		if _, decided := res.Modes[m.Shard]; !decided {
			res.Modes[m.Shard] = MoveOnline
			online = append(online, m)
		}
	}
	serverOf := map[string]string{}
	for _, h := range hosts {
		if hc, ok := cfg.Host(h); ok {
			if pc, err := pgconn.ParseConfig(hc.DSN); err == nil {
				serverOf[h] = pg.Servers(pc)
			}
		}
	}
	res.Checks = onlineChecks(facts, online, parallel, serverOf)
	movable, err := movableChecks(ctx, poolOf, moves)
	if err != nil {
		return nil, err
	}
	res.Checks = append(res.Checks, movable...)
	return res, nil
}

// onlineImpossible is why one online move from src to dst of m cannot run
// at all, "" when it can.
func onlineImpossible(src, dst *hostFacts, m preflightMove) string {
	const one = 1 // a batch of one: one slot and sender, one worker
	switch {
	case src.walLevel != "logical":
		return fmt.Sprintf("wal_level is %s on %s", src.walLevel, m.From)
	case !src.mayPublish():
		return fmt.Sprintf("role %s may not publish on %s", src.role, m.From)
	case !dst.maySubscribe():
		return fmt.Sprintf("role %s may not subscribe on %s", dst.role, m.To)
	case len(src.noIdentity[m.Schema]) > 0:
		return fmt.Sprintf("%s has no primary key or replica identity", strings.Join(src.noIdentity[m.Schema], ", "))
	case len(src.unlogged[m.Schema]) > 0:
		return fmt.Sprintf("%s is unlogged (logical replication publishes no unlogged table)", strings.Join(src.unlogged[m.Schema], ", "))
	case src.maxSlots-src.usedSlots < one:
		return fmt.Sprintf("no replication slot free on %s", m.From)
	case src.maxSenders-src.usedSenders < one:
		return fmt.Sprintf("no WAL sender free on %s", m.From)
	case dst.freeWorkers() < one:
		return fmt.Sprintf("no logical replication worker free on %s", m.To)
	}
	return ""
}

func (f *hostFacts) mayPublish() bool { return f.super || (f.replication && f.createDB) }

// maySubscribe: superuser up to PostgreSQL 15; from 16 a member of
// pg_create_subscription with CREATE on the database.
func (f *hostFacts) maySubscribe() bool {
	return f.super || (f.version >= 160000 && f.createSubscription && f.createDB)
}

// freeWorkers is how many logical replication workers can still start:
// within max_logical_replication_workers and max_worker_processes.
func (f *hostFacts) freeWorkers() int {
	return min(f.maxWorkers-f.usedWorkers, f.maxProcesses-f.usedProcesses)
}

// onlineChecks checks the hosts of the online moves: each source's
// wal_level, slots, senders and role, each moving shard's tables, each
// target's workers and role; n moves at once take min(n, parallel).
//
// Slots, senders and workers are the server's, and two hosts may be two
// databases of one server (serverOf names each host's; a host missing
// from it is a server of its own): they are counted, and reported once,
// per server, for the moves from (or to) all of its hosts.
func onlineChecks(facts map[string]*hostFacts, online []preflightMove, parallel int, serverOf map[string]string) []Check {
	var checks []Check
	from, to := map[string][]int{}, map[string][]int{}
	var sources, targets []string
	for _, m := range online {
		if len(from[m.From]) == 0 {
			sources = append(sources, m.From)
		}
		if len(to[m.To]) == 0 {
			targets = append(targets, m.To)
		}
		from[m.From] = append(from[m.From], m.Shard)
		to[m.To] = append(to[m.To], m.Shard)
	}
	server := func(h string) string {
		if k, ok := serverOf[h]; ok {
			return k
		}
		return "host " + h
	}
	// group is, for the first of hosts on each server, the names of those
	// hosts on it and their moves' shards; the others get nothing.
	group := func(hosts []string, shardsOf map[string][]int) map[string]serverGroup {
		first := map[string]string{}
		names := map[string][]string{}
		shards := map[string][]int{}
		for _, h := range hosts {
			k := server(h)
			if _, ok := first[k]; !ok {
				first[k] = h
			}
			names[k] = append(names[k], h)
			shards[k] = append(shards[k], shardsOf[h]...)
		}
		out := map[string]serverGroup{}
		for k, h := range first {
			slices.Sort(shards[k])
			out[h] = serverGroup{strings.Join(names[k], ", "), names[k], shards[k]}
		}
		return out
	}
	srcServers, dstServers := group(sources, from), group(targets, to)
	capacity := func(host string, role Role, setting string, limit, used, need int, why string, shards []int) Check {
		free := limit - used
		c := Check{Host: host, Role: role, Setting: setting, Value: fmt.Sprintf("%d (%d free)", limit, free),
			Need: fmt.Sprintf("%d free (%s)", need, why), OK: free >= need, Shards: shards}
		if !c.OK {
			c.Fix = &Fix{Offline: true, Restart: true, SQL: fmt.Sprintf("ALTER SYSTEM SET %s = %d", setting, limit+need-free)}
		}
		return c
	}
	for _, h := range sources {
		f, shards := facts[h], from[h]
		wal := Check{Host: h, Role: RoleSource, Setting: CheckWALLevel, Value: f.walLevel, Need: "logical", OK: f.walLevel == "logical", Shards: shards}
		if !wal.OK {
			wal.Fix = &Fix{Offline: true, SQL: "ALTER SYSTEM SET wal_level = logical", Restart: true}
		}
		pub := Check{Host: h, Role: RoleSource, Setting: CheckPublish, Value: roleText(f),
			Need: "superuser, or REPLICATION and CREATE on the database", OK: f.mayPublish(), Shards: shards}
		if !pub.OK {
			pub.Fix = &Fix{Offline: true, SQL: fmt.Sprintf("ALTER ROLE %s REPLICATION; GRANT CREATE ON DATABASE %s TO %s",
				pgx.Identifier{f.role}.Sanitize(), pgx.Identifier{f.database}.Sanitize(), pgx.Identifier{f.role}.Sanitize())}
		}
		checks = append(checks, wal)
		if srv, ok := srcServers[h]; ok {
			var mine []preflightMove
			for _, m := range online {
				if slices.Contains(srv.hosts, m.From) {
					mine = append(mine, m)
				}
			}
			n := batchesFrom(mine)
			why := fmt.Sprintf("one per batch, a source and target pair: %d", n)
			checks = append(checks,
				capacity(srv.names, RoleSource, CheckSlots, f.maxSlots, f.usedSlots, n, why, srv.shards),
				capacity(srv.names, RoleSource, CheckSenders, f.maxSenders, f.usedSenders, n, why, srv.shards))
		}
		checks = append(checks, pub)
		// One line per table-less-key shard: the way out names its tables.
		var bad []int
		var fixes []string
		var tables []string
		for _, m := range online {
			if m.From != h {
				continue
			}
			for _, t := range f.noIdentity[m.Schema] {
				qt := pgx.Identifier{m.Schema, t}.Sanitize()
				tables = append(tables, qt)
				fixes = append(fixes, "ALTER TABLE "+qt+" REPLICA IDENTITY FULL")
			}
			if len(f.noIdentity[m.Schema]) > 0 {
				bad = append(bad, m.Shard)
			}
		}
		id := Check{Host: h, Role: RoleSource, Setting: CheckReplicaIdentity, Value: "present on every table",
			Need: "a primary key or replica identity on every table", OK: len(bad) == 0, Shards: shards}
		if !id.OK {
			id.Value = "missing: tables without a primary key or replica identity: " + strings.Join(tables, ", ")
			id.Shards = bad
			id.Fix = &Fix{Offline: true, SQL: strings.Join(fixes, "; ")}
		}
		checks = append(checks, id)
		// Unlogged tables: a line only when a shard has some.
		bad, fixes, tables = nil, nil, nil
		for _, m := range online {
			if m.From != h || len(f.unlogged[m.Schema]) == 0 {
				continue
			}
			for _, t := range f.unlogged[m.Schema] {
				qt := pgx.Identifier{m.Schema, t}.Sanitize()
				tables = append(tables, qt)
				fixes = append(fixes, "ALTER TABLE "+qt+" SET LOGGED")
			}
			bad = append(bad, m.Shard)
		}
		if len(bad) > 0 {
			checks = append(checks, Check{Host: h, Role: RoleSource, Setting: CheckLogged,
				Value: "unlogged tables: " + strings.Join(tables, ", "), Need: "no unlogged table (logical replication publishes none)",
				Shards: bad, Fix: &Fix{Offline: true, SQL: strings.Join(fixes, "; ")}})
		}
	}
	for _, h := range targets {
		f, shards := facts[h], to[h]
		if srv, ok := dstServers[h]; ok {
			why := "batches run in waves of the free workers"
			checks = append(checks,
				capacity(srv.names, RoleTarget, CheckWorkers, f.maxWorkers, f.usedWorkers, 1, why, srv.shards),
				capacity(srv.names, RoleTarget, CheckWorkerProcesses, f.maxProcesses, f.usedProcesses, 1, why, srv.shards))
		}
		need := "superuser (PostgreSQL 15)"
		if f.version >= 160000 {
			need = "superuser, or pg_create_subscription and CREATE on the database"
		}
		sub := Check{Host: h, Role: RoleTarget, Setting: CheckSubscribe, Value: roleText(f), Need: need, OK: f.maySubscribe(), Shards: shards}
		if !sub.OK {
			sub.Fix = &Fix{Offline: true}
			if f.version >= 160000 {
				sub.Fix.SQL = fmt.Sprintf("GRANT pg_create_subscription TO %s; GRANT CREATE ON DATABASE %s TO %s",
					pgx.Identifier{f.role}.Sanitize(), pgx.Identifier{f.database}.Sanitize(), pgx.Identifier{f.role}.Sanitize())
			}
		}
		checks = append(checks, sub)
	}
	return checks
}

// serverGroup is the hosts of one server among a preflight's sources (or
// targets), and the shards of their moves.
type serverGroup struct {
	names  string   // "pg1", or "pg1, pg2" for two databases of one server
	hosts  []string // the same names, one each
	shards []int
}

// roleText describes the role's rights that matter to replication.
func roleText(f *hostFacts) string {
	var has []string
	if f.super {
		has = append(has, "superuser")
	}
	if f.replication {
		has = append(has, "REPLICATION")
	}
	if f.createDB {
		has = append(has, "CREATE on "+f.database)
	}
	if f.createSubscription {
		has = append(has, "pg_create_subscription")
	}
	if len(has) == 0 {
		has = []string{"none of superuser, REPLICATION, CREATE"}
	}
	return fmt.Sprintf("role %s with %s", f.role, strings.Join(has, ", "))
}

// movesToCheck turns planned and journaled moves into what the preflight
// looks at: planned ones in mode, journaled ones in the mode they started
// with.
func movesToCheck(m *shardmgr.ShardMap, planned []PlannedMove, mode MoveMode, open []*MoveRecord) []preflightMove {
	var out []preflightMove
	for _, r := range open {
		if r.Phase.PastNoReturn() {
			continue // the source's part is done; cleaning up needs nothing more
		}
		out = append(out, preflightMove{Shard: r.Shard, From: r.From, To: r.To, Schema: r.Schema, Mode: r.Mode, replName: r.replName})
	}
	for _, p := range planned {
		out = append(out, preflightMove{Shard: p.Shard, From: p.From, To: p.To, Schema: m.Shards[p.Shard].Schema, Mode: mode})
	}
	return out
}

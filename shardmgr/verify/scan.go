package verify

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
	shsql "github.com/shardid/shardid/sql"
)

// hostScan is what one host holds.
type hostScan struct {
	name string
	pool *pgxpool.Pool
	deep *pgxpool.Pool // for Deep's reads: no statement timeout
	ok   bool          // reachable and scanned

	infoCluster, infoHost string // shardid.host_info; empty when missing
	schemaErr             error  // the host schema's version does not suit this binary
	records               map[int]string
	local                 []shardmgr.LocalShard // shardid.local_shards
	schemas               map[string]bool       // shard_NNNN schemas
	generators            map[string]string     // schema -> marker
	languages             map[string]string     // schema -> next_id()'s language
	sequences             map[string]seqInfo
	columns               map[string][]shardschema.IDColumn // by generator schema
	retired               map[string]fence.RetiredCopy      // moved shards' old copies, by schema
	advancers             map[string][]advancer             // next_id_advance functions, by schema
	locks                 []lockHolder                      // generator locks held at locksAt
	locksAt               time.Time
	blocked               map[int]bool // shards whose generator a session blocks
	clockOffset           time.Duration
	clockErr              time.Duration      // half the round trip
	identity              *pg.ServerIdentity // nil when the server will not tell (failover.go)
}

// advancer is a next_id_advance function found on a host.
type advancer struct {
	signature string // regprocedure text
	args      int
	public    bool // PUBLIC may execute it
}

type seqInfo struct {
	cache, increment int64
	cycle            bool
}

func (v *verifier) scanHost(ctx context.Context, h shardmgr.Host, hs *hostScan) {
	// The statements run under server-side timeouts; this bound is for a
	// server that stopped answering altogether.
	ctx, cancel := context.WithTimeout(ctx, connectTimeout(h.DSN)+4*v.opts.StatementTimeout)
	defer cancel()
	pool, err := v.c.HostPool(ctx, h.Name, v.session(v.opts.StatementTimeout))
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		v.problem(CheckHost, -1, h.Name, "unreachable: %s", pg.OneLine(err))
		return
	}
	hs.pool = pool
	if v.opts.Deep {
		if hs.deep, err = v.c.HostPool(ctx, h.Name, v.session(0)); err != nil {
			v.problem(CheckHost, -1, h.Name, "unreachable: %s", pg.OneLine(err))
			return
		}
	}
	if err := v.scanHostObjects(ctx, hs); err != nil {
		v.problem(CheckHost, -1, h.Name, "scan failed: %v", err)
		return
	}
	hs.ok = true
}

// scanHostObjects reads what the checks judge on one host, one step per
// kind of object.
func (v *verifier) scanHostObjects(ctx context.Context, hs *hostScan) error {
	// Clock first, on a quiet connection.
	for _, step := range []func(context.Context, *hostScan) error{
		v.scanClock, scanRecords, scanIdentity, scanSchemas, scanSequences, scanColumns, scanAdvancers, v.scanOwners, v.scanTrust, v.scanLocks,
	} {
		if err := step(ctx, hs); err != nil {
			return err
		}
	}
	return nil
}

// scanClock measures the host's clock against the manager's.
func (v *verifier) scanClock(ctx context.Context, hs *hostScan) error {
	t0 := v.opts.Now()
	var hostNow time.Time
	if err := hs.pool.QueryRow(ctx, `SELECT pg_catalog.clock_timestamp()`).Scan(&hostNow); err != nil {
		return err
	}
	t1 := v.opts.Now()
	if v.opts.hostClock != nil {
		hostNow = v.opts.hostClock(hs.name, hostNow)
	}
	hs.clockErr = t1.Sub(t0) / 2
	hs.clockOffset = hostNow.Sub(t0.Add(hs.clockErr))
	return nil
}

// scanRecords reads the host's record: its cluster and name, and the
// shards it says it holds.
func scanRecords(ctx context.Context, hs *hostScan) error {
	q := hs.pool
	sv, err := shardmgr.ReadHostVersion(ctx, q, hs.name)
	if err != nil {
		return err
	}
	hs.schemaErr = sv.Check(shardmgr.UseRead)
	if hs.infoCluster, hs.infoHost, err = hostidentity.ReadInfo(ctx, q); err != nil {
		return err
	}
	hs.records = map[int]string{}
	if hs.infoCluster == "" {
		return nil
	}
	if hs.local, err = shardmgr.ReadLocalShards(ctx, q); err != nil {
		return err
	}
	for _, l := range hs.local {
		hs.records[l.Shard] = l.State
	}
	return nil
}

// scanSchemas finds the shard schemas, their generators' markers and the
// retired copies of moved shards.
func scanSchemas(ctx context.Context, hs *hostScan) error {
	q := hs.pool
	rows, err := q.Query(ctx, `SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname ~ '^shard_[0-9]{4}$'`)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	hs.schemas = map[string]bool{}
	for _, n := range names {
		hs.schemas[n] = true
	}
	if hs.generators, err = shardschema.ReadMarkers(ctx, q); err != nil {
		return err
	}
	if hs.languages, err = readGeneratorLanguages(ctx, q); err != nil {
		return err
	}
	hs.retired, err = fence.ReadRetired(ctx, q)
	return err
}

// scanSequences reads the settings of the generators' sequences.
func scanSequences(ctx context.Context, hs *hostScan) error {
	rows, err := hs.pool.Query(ctx, `SELECT schemaname || '.' || sequencename, cache_size, increment_by, cycle
		FROM pg_catalog.pg_sequences WHERE sequencename IN ('next_id_counter', 'table_id_seq')`)
	if err != nil {
		return err
	}
	hs.sequences = map[string]seqInfo{}
	var name string
	var si seqInfo
	_, err = pgx.ForEachRow(rows, []any{&name, &si.cache, &si.increment, &si.cycle}, func() error {
		hs.sequences[name] = si
		return nil
	})
	return err
}

// scanColumns finds the columns whose DEFAULT calls a next_id()
// generator, by the generator's schema: the shard the column's ids belong
// to. A partitioned table is read whole (IDColumn.From), so its
// partitions are left out: a partition attached to the tree may lack the
// DEFAULT, and its rows would not be read twice.
func scanColumns(ctx context.Context, hs *hostScan) error {
	cols, err := shardschema.IDColumns(ctx, hs.pool, "")
	if err != nil {
		return err
	}
	hs.columns = map[string][]shardschema.IDColumn{}
	for _, col := range cols {
		if !col.Partition {
			hs.columns[col.Schema] = append(hs.columns[col.Schema], col)
		}
	}
	return nil
}

// scanAdvancers finds the next_id_advance functions and whether PUBLIC may
// execute them.
func scanAdvancers(ctx context.Context, hs *hostScan) error {
	rows, err := hs.pool.Query(ctx, `SELECT n.nspname, p.oid::pg_catalog.regprocedure::text, p.pronargs,
		  EXISTS (SELECT FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
		          WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = $1`, shsql.AdvanceName)
	if err != nil {
		return err
	}
	hs.advancers = map[string][]advancer{}
	var gen string
	var adv advancer
	_, err = pgx.ForEachRow(rows, []any{&gen, &adv.signature, &adv.args, &adv.public}, func() error {
		hs.advancers[gen] = append(hs.advancers[gen], adv)
		return nil
	})
	return err
}

// scanLocks finds the sessions holding a generator's advisory lock: shared
// by an idle session, a leak that stops pull-ups; exclusive, for longer
// than a pull-up takes, it blocks every next_id() (confirmBlocked).
func (v *verifier) scanLocks(ctx context.Context, hs *hostScan) error {
	hs.locksAt = time.Now()
	var err error
	if hs.locks, err = readLockHolders(ctx, hs.pool, -1); err != nil {
		return err
	}
	v.reportIdleSharedLocks(hs)
	return nil
}

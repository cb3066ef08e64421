package verify

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/fence"
	"github.com/shardid/shardid/shardmgr/internal/pg"
	"github.com/shardid/shardid/shardmgr/internal/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// hostScan is what one host holds.
type hostScan struct {
	name string
	pool *pgxpool.Pool
	deep *pgxpool.Pool // for Deep's reads: no statement timeout
	ok   bool          // reachable and scanned

	infoCluster, infoHost string // shardid.host_info; empty when missing
	records               map[int]string
	schemas               map[string]bool   // shard_NNNN schemas
	generators            map[string]string // schema -> marker
	sequences             map[string]seqInfo
	columns               map[string][]shardschema.IDColumn // by generator schema
	retired               map[string]fence.RetiredCopy      // moved shards' old copies, by schema
	advancers             map[string][]advancer             // next_id_advance functions, by schema
	locks                 []lockHolder                      // generator locks held at locksAt
	locksAt               time.Time
	blocked               map[int]bool // shards whose generator a session blocks
	clockOffset           time.Duration
	clockErr              time.Duration // half the round trip
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
	pool, err := openVerifyPool(ctx, h.DSN, v.opts.Workers+1, v.opts.LockTimeout, v.opts.StatementTimeout)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		v.problem(CheckHost, -1, h.Name, "unreachable: %s", pg.OneLine(err))
		return
	}
	hs.pool = pool
	if v.opts.Deep {
		if hs.deep, err = openVerifyPool(ctx, h.DSN, v.opts.Workers+1, v.opts.LockTimeout, 0); err != nil {
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

func (v *verifier) scanHostObjects(ctx context.Context, hs *hostScan) error {
	q := hs.pool
	// Clock first, on a quiet connection.
	t0 := v.opts.Now()
	var hostNow time.Time
	if err := q.QueryRow(ctx, `SELECT pg_catalog.clock_timestamp()`).Scan(&hostNow); err != nil {
		return err
	}
	t1 := v.opts.Now()
	if v.opts.hostClock != nil {
		hostNow = v.opts.hostClock(hs.name, hostNow)
	}
	hs.clockErr = t1.Sub(t0) / 2
	hs.clockOffset = hostNow.Sub(t0.Add(hs.clockErr))

	err := q.QueryRow(ctx, `SELECT cluster, host FROM shardid.host_info`).Scan(&hs.infoCluster, &hs.infoHost)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) && !pg.IsUndefinedTable(err) {
		return err
	}
	hs.records = map[int]string{}
	if hs.infoCluster != "" {
		rows, err := q.Query(ctx, `SELECT shard, state FROM shardid.local_shards`)
		if err != nil && !pg.IsUndefinedTable(err) {
			return err
		}
		if err == nil {
			var id int
			var state string
			if _, err := pgx.ForEachRow(rows, []any{&id, &state}, func() error { hs.records[id] = state; return nil }); err != nil {
				return err
			}
		}
	}

	hs.schemas = map[string]bool{}
	rows, err := q.Query(ctx, `SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname ~ '^shard_[0-9]{4}$'`)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		hs.schemas[n] = true
	}
	if hs.generators, err = shardschema.ReadMarkers(ctx, q); err != nil {
		return err
	}
	if hs.retired, err = fence.ReadRetired(ctx, q); err != nil {
		return err
	}

	hs.sequences = map[string]seqInfo{}
	rows, err = q.Query(ctx, `SELECT schemaname || '.' || sequencename, cache_size, increment_by, cycle
		FROM pg_catalog.pg_sequences WHERE sequencename IN ('next_id_counter', 'table_id_seq')`)
	if err != nil {
		return err
	}
	var name string
	var si seqInfo
	if _, err := pgx.ForEachRow(rows, []any{&name, &si.cache, &si.increment, &si.cycle}, func() error {
		hs.sequences[name] = si
		return nil
	}); err != nil {
		return err
	}

	// Columns whose DEFAULT calls a next_id() generator, by the
	// generator's schema: the shard the column's ids belong to.
	hs.columns = map[string][]shardschema.IDColumn{}
	cols, err := shardschema.IDColumns(ctx, q, "")
	if err != nil {
		return err
	}
	for _, col := range cols {
		if !col.Partitioned {
			hs.columns[col.Schema] = append(hs.columns[col.Schema], col)
		}
	}

	var gen string
	rows, err = q.Query(ctx, `SELECT n.nspname, p.oid::pg_catalog.regprocedure::text, p.pronargs,
		  EXISTS (SELECT FROM pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
		          WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = $1`, shsql.AdvanceName)
	if err != nil {
		return err
	}
	hs.advancers = map[string][]advancer{}
	var adv advancer
	if _, err := pgx.ForEachRow(rows, []any{&gen, &adv.signature, &adv.args, &adv.public}, func() error {
		hs.advancers[gen] = append(hs.advancers[gen], adv)
		return nil
	}); err != nil {
		return err
	}

	// Sessions holding a generator's advisory lock: shared by an idle
	// session, a leak that stops pull-ups; exclusive, for longer than a
	// pull-up takes, it blocks every next_id() (confirmBlocked).
	hs.locksAt = time.Now()
	if hs.locks, err = readLockHolders(ctx, q, -1); err != nil {
		return err
	}
	v.reportIdleSharedLocks(hs)
	return nil
}

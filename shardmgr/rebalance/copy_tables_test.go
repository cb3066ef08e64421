package rebalance

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// partitionedMigrations make, in every shard, a partitioned table (events:
// two range partitions, a primary key and a secondary index on the
// parent), a sub-partitioned one (metrics: a list partition that is
// itself range-partitioned, and a default partition) and a plain one.
var partitionedMigrations = map[string]string{
	"001_events.sql": `
CREATE TABLE {{.schema}}.events (
    id      bigint NOT NULL DEFAULT {{.next_id}},
    day     date   NOT NULL,
    payload text,
    PRIMARY KEY (id, day)
) PARTITION BY RANGE (day);
CREATE TABLE {{.schema}}.events_p0 PARTITION OF {{.schema}}.events FOR VALUES FROM ('2000-01-01') TO ('2025-01-01');
CREATE TABLE {{.schema}}.events_p1 PARTITION OF {{.schema}}.events FOR VALUES FROM ('2025-01-01') TO ('2100-01-01');
CREATE INDEX events_payload_idx ON {{.schema}}.events (payload);
CREATE TABLE {{.schema}}.notes (id bigint PRIMARY KEY DEFAULT {{.next_id}}, body text NOT NULL);
CREATE INDEX notes_body_idx ON {{.schema}}.notes (body);

---- create above / drop below ----

DROP TABLE {{.schema}}.notes;
DROP TABLE {{.schema}}.events;
`,
	"002_metrics.sql": `
CREATE TABLE {{.schema}}.metrics (
    id   bigint NOT NULL DEFAULT {{.next_id}},
    kind int    NOT NULL,
    at   date   NOT NULL,
    v    double precision,
    PRIMARY KEY (id, kind, at)
) PARTITION BY LIST (kind);
CREATE TABLE {{.schema}}.metrics_k0 PARTITION OF {{.schema}}.metrics FOR VALUES IN (0) PARTITION BY RANGE (at);
CREATE TABLE {{.schema}}.metrics_k0_old PARTITION OF {{.schema}}.metrics_k0 FOR VALUES FROM (MINVALUE) TO ('2025-01-01');
CREATE TABLE {{.schema}}.metrics_k0_new PARTITION OF {{.schema}}.metrics_k0 FOR VALUES FROM ('2025-01-01') TO (MAXVALUE);
CREATE TABLE {{.schema}}.metrics_other PARTITION OF {{.schema}}.metrics DEFAULT;
CREATE INDEX metrics_at_idx ON {{.schema}}.metrics (at);

---- create above / drop below ----

DROP TABLE {{.schema}}.metrics;
`,
}

// partitionCluster is a cluster of shards shards migrated with
// partitionedMigrations, with pg4 added to the cluster file.
func partitionCluster(t *testing.T, shards int) (*shardmgr.Config, *migrate.MigrationSet) {
	t.Helper()
	cfg := installtest.Cluster(t, shards)
	set := setOf(t, partitionedMigrations)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	addHost(t, cfg, "pg4", "100ms")
	return cfg, set
}

// appRole creates a login role on every host's server that may read and
// write the shards' tables, as an operator would set one up: on the
// shards there now, and (by default privileges of the mover's role) on
// what the mover creates later, the copies it builds. It returns a pool
// per host, as that role.
//
// USAGE on the shardid schema is granted too: the online move's change
// log trigger runs as the writer (issue 18, item 4, not this test's
// subject).
func appRole(t *testing.T, cfg *shardmgr.Config) map[string]*pgxpool.Pool {
	t.Helper()
	role := fmt.Sprintf("part_app_%d", clustertest.DBCounter.Add(1))
	qr := pgx.Identifier{role}.Sanitize()
	pools := map[string]*pgxpool.Pool{}
	for _, h := range cfg.Hosts {
		// A host new to the cluster gets its database now (a move would
		// create it), so that it has the default privileges before.
		_, err := pgdatabase.Ensure(clustertest.Ctx(t), h.DSN)
		require.NoError(t, err)
		admin := clustertest.HostPool(t, cfg, h.Name)
		var mover string
		require.NoError(t, admin.QueryRow(clustertest.Ctx(t), `SELECT current_user`).Scan(&mover))
		_, err = admin.Exec(clustertest.Ctx(t), fmt.Sprintf(`DO $$ BEGIN CREATE ROLE %s LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`, qr))
		require.NoError(t, err)
		rows, err := admin.Query(clustertest.Ctx(t), `SELECT nspname FROM pg_namespace WHERE nspname ~ '^shard_[0-9]{4}$'`)
		require.NoError(t, err)
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		grants := fmt.Sprintf(`ALTER DEFAULT PRIVILEGES FOR ROLE %[2]s GRANT USAGE ON SCHEMAS TO %[1]s;
			ALTER DEFAULT PRIVILEGES FOR ROLE %[2]s GRANT SELECT, INSERT ON TABLES TO %[1]s;`, qr, pgx.Identifier{mover}.Sanitize())
		// (A new host's shardid schema gets it by default.)
		if clustertest.TableExists(t, admin, "shardid.local_shards") {
			grants += `GRANT USAGE ON SCHEMA shardid TO ` + qr + `;`
		}
		for _, s := range schemas {
			grants += fmt.Sprintf(`GRANT USAGE ON SCHEMA %[2]s TO %[1]s; GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA %[2]s TO %[1]s;`, qr, pgx.Identifier{s}.Sanitize())
		}
		_, err = admin.Exec(clustertest.Ctx(t), grants)
		require.NoError(t, err)
		t.Cleanup(func() {
			c, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = admin.Exec(c, `DROP OWNED BY `+qr)
		})
		u, err := url.Parse(h.DSN)
		require.NoError(t, err)
		u.User = url.User(role)
		p, err := pg.OpenPool(clustertest.Ctx(t), u.String(), 4)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		pools[h.Name] = p
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, h := range cfg.Hosts {
			if conn, err := pgx.Connect(c, h.DSN); err == nil {
				_, _ = conn.Exec(c, `DROP ROLE IF EXISTS `+qr)
				conn.Close(c)
			}
		}
	})
	return pools
}

// acks are the rows writers were told were stored, by top table.
type acks struct {
	mu       sync.Mutex
	ids      map[string][]int64
	refused  map[string]int // by writer kind
	stored   map[string]int
	failures []error
}

func (a *acks) add(kind, table string, id int64, err error, refusal func(error) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil:
		a.ids[table] = append(a.ids[table], id)
		a.stored[kind]++
	case refusal(err):
		a.refused[kind]++
	default:
		a.failures = append(a.failures, fmt.Errorf("%s into %s: %w", kind, table, err))
	}
}

// partitionWriters write into shard until stop closes: through the router
// into the partitioned parents (their rows spread over every partition),
// and, as the application role, straight into a leaf of each tree on the
// host the router's map names (a program that bypasses the router, or
// holds an old map). Every write is one transaction; a write counts only
// once it committed.
func partitionWriters(r *shardmgr.Router, app map[string]*pgxpool.Pool, shard int, stop <-chan struct{}) (*acks, *sync.WaitGroup) {
	a := &acks{ids: map[string][]int64{}, refused: map[string]int{}, stored: map[string]int{}}
	var wg sync.WaitGroup
	days := []string{"2021-03-04", "2027-05-06"}
	routerRefusal := func(err error) bool { return errors.Is(err, shardmgr.ErrShardMoving) }
	// Straight to a host: the fence's refusal, or (map not yet refreshed)
	// the shard's schema already renamed away from under the old name.
	hostRefusal := func(err error) bool {
		var pe *pgconn.PgError
		return fence.IsFenceError(err) || (errors.As(err, &pe) && (pe.Code == pgerrcode.UndefinedTable || pe.Code == pgerrcode.InvalidSchemaName))
	}
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var id int64
				table := "events"
				err := r.Tx(context.Background(), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					if (i+w)%2 == 0 {
						return tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (day, payload) VALUES ($1, 'router') RETURNING id`, s.Table("events")), days[i%2]).Scan(&id)
					}
					table = "metrics"
					return tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (kind, at, v) VALUES ($1, $2, 1) RETURNING id`, s.Table("metrics")), i%3, days[(i/2)%2]).Scan(&id)
				})
				a.add("router", table, id, err, routerRefusal)
				if err != nil {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s := r.Map().Shards[shard]
			var id int64
			var err error
			table := "events"
			if i%2 == 0 {
				err = app[s.Host].QueryRow(context.Background(), fmt.Sprintf(`INSERT INTO %s (day, payload) VALUES ('2030-01-02', 'leaf') RETURNING id`,
					pgx.Identifier{s.Schema, "events_p1"}.Sanitize())).Scan(&id)
			} else {
				table = "metrics"
				err = app[s.Host].QueryRow(context.Background(), fmt.Sprintf(`INSERT INTO %s (kind, at, v) VALUES (0, '2030-01-02', 2) RETURNING id`,
					pgx.Identifier{s.Schema, "metrics_k0_new"}.Sanitize())).Scan(&id)
			}
			a.add("leaf", table, id, err, hostRefusal)
			if err != nil {
				time.Sleep(2 * time.Millisecond)
			}
		}
	})
	return a, &wg
}

// treeIDs reads the ids of table (a partitioned parent: all its
// partitions' rows) of shard on the host the catalog places it on.
func treeIDs(t *testing.T, cfg *shardmgr.Config, shard int, table string) []int64 {
	t.Helper()
	m := clustertest.ClusterMap(t, cfg)
	p := clustertest.HostPool(t, cfg, m.Shards[shard].Host)
	rows, err := p.Query(clustertest.Ctx(t), fmt.Sprintf(`SELECT id FROM %s ORDER BY id`, pgx.Identifier{m.Shards[shard].Schema, table}.Sanitize()))
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

// indexTree lists the indexes of schema's tables: table, index, whether
// it is valid and backs a constraint, and the index it is attached to.
func indexTree(t *testing.T, db *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := db.Query(clustertest.Ctx(t), `SELECT pg_catalog.format('%s %s valid=%s constraint=%s parent=%s', c.relname, ic.relname, i.indisvalid,
			coalesce((SELECT k.contype::text FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = c.oid), '-'),
			coalesce((SELECT p.relname FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent WHERE h.inhrelid = ic.oid), '-'))
		FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY 1`, schema)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

// seedPartitions stores rows in every partition of shard's trees and in
// its plain table, through r.
func seedPartitions(t *testing.T, r *shardmgr.Router, shard, n int) {
	t.Helper()
	require.NoError(t, r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		for _, sql := range []string{
			`INSERT INTO %s (day, payload) SELECT date '2010-01-01' + (g * 7), 'seed ' || g FROM generate_series(1, $1) g`,
			`INSERT INTO %s (kind, at, v) SELECT g %% 3, date '2015-01-01' + (g * 5), g FROM generate_series(1, $1) g`,
			`INSERT INTO %s (body) SELECT 'note ' || g FROM generate_series(1, $1) g`,
		} {
			table := map[bool]string{true: "events", false: "metrics"}[strings.Contains(sql, "day")]
			if strings.Contains(sql, "body") {
				table = "notes"
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(sql, s.Table(table)), n); err != nil {
				return err
			}
		}
		return nil
	}))
}

// A shard with a partitioned and a sub-partitioned table moves whole,
// offline and online, while writers insert through the router into the
// parents and, as the application role, straight into a leaf on the
// shard's host: every acknowledged row is on the new host afterwards, and
// nothing else; writes are only ever refused with the typed refusal; and
// the retired copy refuses a write into a leaf.
func TestMovePartitionedTablesUnderWrites(t *testing.T) {
	t.Parallel()
	cfg, set := partitionCluster(t, 4)
	app := appRole(t, cfg)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	for i, mode := range []MoveMode{MoveOffline, MoveOnline} {
		shard := i
		from := clustertest.ClusterMap(t, cfg).Shards[shard].Host
		seedPartitions(t, r, shard, 400)
		before := map[string][]int64{}
		for _, tbl := range []string{"events", "metrics", "notes"} {
			before[tbl] = treeIDs(t, cfg, shard, tbl)
			require.Len(t, before[tbl], 400)
		}

		stop := make(chan struct{})
		w, wg := partitionWriters(r, app, shard, stop)
		time.Sleep(300 * time.Millisecond)
		res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Mode: mode, Migrations: set, Logger: testLogger(t)})
		time.Sleep(500 * time.Millisecond)
		close(stop)
		wg.Wait()
		require.NoError(t, err, "%s", mode)
		require.Equal(t, PhaseCleaned, res.Phase)
		require.Equal(t, "pg4", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
		require.Empty(t, w.failures, "%s: writers saw only the typed refusal", mode)
		require.Positive(t, w.stored["router"], mode)
		require.Positive(t, w.stored["leaf"], mode)
		t.Logf("%s: moved %d rows; refused for %d ms; router writes stored %d refused %d; leaf writes stored %d refused %d",
			mode, res.Rows, res.Refused.Milliseconds(), w.stored["router"], w.refused["router"], w.stored["leaf"], w.refused["leaf"])
		require.GreaterOrEqual(t, res.Rows, int64(3*400), "%s: the rows of every partition were copied and checked", mode)

		// Every acknowledged row is on the new host, and nothing else.
		for _, tbl := range []string{"events", "metrics", "notes"} {
			want := append(slices.Clone(before[tbl]), w.ids[tbl]...)
			slices.Sort(want)
			require.Equal(t, want, treeIDs(t, cfg, shard, tbl), "%s: %s", mode, tbl)
		}

		// The new copy has the source's indexes, each valid and attached
		// to its parent's as the source's are.
		src := clustertest.HostPool(t, cfg, from)
		require.Equal(t, indexTree(t, src, res.RetiredSchema), indexTree(t, clustertest.HostPool(t, cfg, "pg4"), clustertest.ClusterMap(t, cfg).Shards[shard].Schema), mode)

		// The retired copy refuses a write into a leaf, even from its
		// owner.
		_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s (id, day) VALUES (1, '2030-01-01')`, pgx.Identifier{res.RetiredSchema, "events_p1"}.Sanitize()))
		require.True(t, fence.IsFenceError(err), "%s: %v", mode, err)
		_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s (id, kind, at) VALUES (1, 0, '2030-01-01')`, pgx.Identifier{res.RetiredSchema, "metrics_k0_new"}.Sanitize()))
		require.True(t, fence.IsFenceError(err), "%s: %v", mode, err)
		// The new copy takes writes into the parent and into a leaf.
		seedPartitions(t, r, shard, 1)
		s := clustertest.ClusterMap(t, cfg).Shards[shard]
		_, err = app["pg4"].Exec(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s (day) VALUES ('2030-01-01')`, pgx.Identifier{s.Schema, "events_p1"}.Sanitize()))
		require.NoError(t, err)
		require.Zero(t, replicationLeftovers(t, cfg, moveRecord(t, cfg, res.ID).replName))
	}
	requireVerifyOK(t, cfg)
}

// An online move of a shard with partitioned tables aborts from every
// phase before the flip: the target's copy, the replication and the
// fence go (writes straight into a partition work again), the shard's
// rows stay where they were. So does a move whose publication lists the
// partitioned parents themselves, as moves before this one made it.
func TestAbortPartitionedMove(t *testing.T) {
	t.Parallel()
	cfg, set := partitionCluster(t, 4)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	for shard, phase := range []Phase{PhaseCopy, PhaseCatchup, PhaseFenced, PhaseCopy} {
		seedPartitions(t, r, shard, 50)
		before := clustertest.ClusterMap(t, cfg).Shards[shard]
		want := treeIDs(t, cfg, shard, "events")
		opts := MoveOptions{Migrations: set}
		opts.stopAfter = phase
		res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
		require.ErrorIs(t, err, errStopped)
		src := clustertest.HostPool(t, cfg, before.Host)
		rec := moveRecord(t, cfg, res.ID)
		if shard == 3 {
			// The publication as an older mover made it: the parents.
			var members []string
			rows, err := src.Query(clustertest.Ctx(t), `SELECT pg_catalog.quote_ident(schemaname) || '.' || pg_catalog.quote_ident(tablename)
				FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2`, rec.replName, before.Schema)
			require.NoError(t, err)
			members, err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			q := func(t string) string { return pgx.Identifier{before.Schema, t}.Sanitize() }
			_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`ALTER PUBLICATION %s DROP TABLE %s; ALTER PUBLICATION %s ADD TABLE %s, %s`,
				pgx.Identifier{rec.replName}.Sanitize(), strings.Join(members, ", "), pgx.Identifier{rec.replName}.Sanitize(), q("events"), q("metrics")))
			require.NoError(t, err)
		}
		_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{shard})
		require.NoError(t, err, "abort after %s", phase)
		after := clustertest.ClusterMap(t, cfg).Shards[shard]
		require.Equal(t, before.Host, after.Host)
		require.Equal(t, shardmgr.StateActive, after.State)
		require.Zero(t, replicationLeftovers(t, cfg, rec.replName))
		require.False(t, clustertest.TableExists(t, clustertest.HostPool(t, cfg, "pg4"), before.Schema+".events"), "the target's copy is gone")
		require.Equal(t, want, treeIDs(t, cfg, shard, "events"))
		// Writes straight into a partition and through the parent work.
		_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s (day) VALUES ('2030-01-01'); INSERT INTO %s (kind, at) VALUES (0, '2030-01-01')`,
			pgx.Identifier{before.Schema, "events_p1"}.Sanitize(), pgx.Identifier{before.Schema, "metrics_k0_new"}.Sanitize()))
		require.NoError(t, err, "after %s", phase)
		seedPartitions(t, r, shard, 1)
		var fences int
		require.NoError(t, src.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND tg.tgname = 'shardid_fence'`, before.Schema).Scan(&fences))
		require.Zero(t, fences, "the fence is gone from every table")
	}
	requireVerifyOK(t, cfg)
}

// What a move cannot carry is refused by the preflight, offline and
// online, before anything changes, naming each table: a foreign table,
// a partition outside the shard's schema.
func TestPreflightRefusesUnmovableTables(t *testing.T) {
	t.Parallel()
	cfg, set := partitionCluster(t, 3)
	s := clustertest.ClusterMap(t, cfg).Shards[1]
	src := clustertest.HostPool(t, cfg, s.Host)
	other := fmt.Sprintf("elsewhere_%d", clustertest.DBCounter.Add(1))
	_, err := src.Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE FOREIGN DATA WRAPPER %[3]s; CREATE SERVER %[3]s FOREIGN DATA WRAPPER %[3]s;
		CREATE FOREIGN TABLE %[1]s.remote (id bigint) SERVER %[3]s;
		CREATE SCHEMA %[2]s; CREATE TABLE %[2]s.events_2100 PARTITION OF %[1]s.events FOR VALUES FROM ('2100-01-01') TO ('2200-01-01')`,
		pgx.Identifier{s.Schema}.Sanitize(), pgx.Identifier{other}.Sanitize(), pgx.Identifier{other + "_fdw"}.Sanitize()))
	require.NoError(t, err)
	for _, mode := range []MoveMode{MoveOffline, MoveOnline, MoveAuto} {
		_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Mode: mode, Migrations: set})
		require.ErrorIs(t, err, ErrPreflight, mode)
		require.ErrorIs(t, err, ErrUnmovable, mode)
		require.ErrorContains(t, err, s.Schema+".remote is a foreign table", mode)
		require.ErrorContains(t, err, s.Schema+".events has partition "+other+".events_2100 outside the shard's schema", mode)
		require.ErrorContains(t, err, "(shards [1])", mode)
	}
	// Online, a partitioned table without a key is named by its leaves,
	// which are what PostgreSQL publishes and asks an identity of.
	_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE TABLE %[1]s.nokey (id bigint, day date) PARTITION BY RANGE (day);
		CREATE TABLE %[1]s.nokey_all PARTITION OF %[1]s.nokey FOR VALUES FROM (MINVALUE) TO (MAXVALUE)`, pgx.Identifier{s.Schema}.Sanitize()))
	require.NoError(t, err)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: set})
	require.ErrorIs(t, err, ErrNoReplicaIdentity)
	var pe *PreflightError
	require.ErrorAs(t, err, &pe)
	var fix string
	for _, c := range pe.Failed {
		if c.Setting == CheckReplicaIdentity {
			fix = c.Fix.SQL
		}
	}
	require.Equal(t, "ALTER TABLE "+pgx.Identifier{s.Schema, "nokey_all"}.Sanitize()+" REPLICA IDENTITY FULL", fix,
		"the leaf, not its parent (which holds no rows), nor the trees with a key on each leaf")

	recs, err := Moves(clustertest.Ctx(t), clustertest.Handle(t, cfg), true)
	require.NoError(t, err)
	require.Empty(t, recs, "nothing journaled")
}

// A move left by an older mover with a partition tree's key half rebuilt
// on the target (the parent's index ON ONLY, invalid, the leaves' gone)
// is not flipped to: the check names the index, the source serves, and an
// abort and a new move carry the shard with its keys.
func TestMoveRefusesTargetWithoutItsKeys(t *testing.T) {
	t.Parallel()
	cfg, set := partitionCluster(t, 3)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	const shard = 2
	seedPartitions(t, r, shard, 20)
	s := clustertest.ClusterMap(t, cfg).Shards[shard]
	opts := MoveOptions{Migrations: set}
	opts.stopAfter = PhaseSchema
	_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	q := pgx.Identifier{s.Schema, "events"}.Sanitize()
	_, err = clustertest.HostPool(t, cfg, "pg4").Exec(clustertest.Ctx(t), fmt.Sprintf(`ALTER TABLE %[1]s DROP CONSTRAINT events_pkey;
		CREATE UNIQUE INDEX events_pkey ON ONLY %[1]s (id, day)`, q))
	require.NoError(t, err)

	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: set})
	require.ErrorIs(t, err, ErrMoveCheck)
	require.ErrorContains(t, err, "events_p0_pkey is missing")
	require.ErrorContains(t, err, "events_pkey is not valid")
	after := clustertest.ClusterMap(t, cfg).Shards[shard]
	require.Equal(t, s.Host, after.Host)
	require.Equal(t, shardmgr.StateActive, after.State)
	seedPartitions(t, r, shard, 1)

	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{shard})
	require.NoError(t, err)
	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: set})
	require.NoError(t, err)
	require.Equal(t, indexTree(t, clustertest.HostPool(t, cfg, s.Host), res.RetiredSchema), indexTree(t, clustertest.HostPool(t, cfg, "pg4"), s.Schema))
	require.Len(t, treeIDs(t, cfg, shard, "events"), 21)
}

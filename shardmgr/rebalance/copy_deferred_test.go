package rebalance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// deferredMigration makes, in every shard, a parent and a child table
// joined by a foreign key, and triggers on them: two (ENABLE) that record
// who ran them in public.fired, their function owned by role OWNER (not a
// superuser), and three no-op ones disabled, ENABLE REPLICA and ENABLE
// ALWAYS.
const deferredMigration = `
CREATE TABLE {{.schema}}.parent (id bigint PRIMARY KEY DEFAULT {{.next_id}}, name text NOT NULL);
CREATE TABLE {{.schema}}.child (id bigint PRIMARY KEY DEFAULT {{.next_id}},
    parent_id bigint NOT NULL REFERENCES {{.schema}}.parent (id) ON DELETE CASCADE, note text);
CREATE FUNCTION {{.schema}}.record_who() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO public.fired (who, tbl, op) VALUES (current_user, TG_TABLE_NAME, TG_OP);
  RETURN NULL;
END $f$;
ALTER FUNCTION {{.schema}}.record_who() OWNER TO OWNER;
CREATE FUNCTION {{.schema}}.noop() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NULL; END $f$;
CREATE TRIGGER who_rows AFTER INSERT OR UPDATE OR DELETE ON {{.schema}}.child FOR EACH ROW EXECUTE FUNCTION {{.schema}}.record_who();
CREATE TRIGGER who_truncate AFTER TRUNCATE ON {{.schema}}.parent FOR EACH STATEMENT EXECUTE FUNCTION {{.schema}}.record_who();
CREATE TRIGGER t_disabled AFTER INSERT ON {{.schema}}.parent FOR EACH ROW EXECUTE FUNCTION {{.schema}}.noop();
ALTER TABLE {{.schema}}.parent DISABLE TRIGGER t_disabled;
CREATE TRIGGER t_replica AFTER INSERT ON {{.schema}}.parent FOR EACH ROW EXECUTE FUNCTION {{.schema}}.noop();
ALTER TABLE {{.schema}}.parent ENABLE REPLICA TRIGGER t_replica;
CREATE TRIGGER t_always AFTER UPDATE ON {{.schema}}.child FOR EACH ROW EXECUTE FUNCTION {{.schema}}.noop();
ALTER TABLE {{.schema}}.child ENABLE ALWAYS TRIGGER t_always;
COMMENT ON TRIGGER who_rows ON {{.schema}}.child IS 'records who';
`

// triggersOf lists a shard's triggers on a host, with their enabled state.
func triggersOf(t *testing.T, cfg *shardmgr.Config, host, schema string) []string {
	t.Helper()
	rows, err := clustertest.HostPool(t, cfg, host).Query(clustertest.Ctx(t), `SELECT c.relname || '.' || t.tgname || '=' || t.tgenabled::text || coalesce(' ' || obj_description(t.oid, 'pg_trigger'), '')
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = $1::regnamespace AND NOT t.tgisinternal
		AND t.tgname NOT LIKE 'shardid%' ORDER BY 1`, schema)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// A shard with a foreign key between two of its tables and user triggers
// moves online (resumed after its schema phase) and offline: the copy
// makes the foreign key and the triggers after the rows are in, in the
// source's enabled state, so neither the copy order trips the key nor does
// the mover's TRUNCATE or COPY run the triggers' function (owned by a
// non-superuser) as the mover. Failed before: the offline copy in the
// copy phase (violates foreign key constraint), and the triggers recorded
// the mover in public.fired on the target.
func TestMoveCarriesForeignKeysAndTriggersAfterTheCopy(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	addHost(t, cfg, "pg4", "100ms")
	owner := clustertest.Role(t, cfg, "trig_owner")
	for _, h := range cfg.Hosts {
		_, err := pgdatabase.Ensure(clustertest.Ctx(t), h.DSN)
		require.NoError(t, err)
		_, err = clustertest.HostPool(t, cfg, h.Name).Exec(clustertest.Ctx(t), `CREATE TABLE IF NOT EXISTS public.fired (who text, tbl text, op text);
			GRANT INSERT ON public.fired TO PUBLIC`)
		require.NoError(t, err)
	}
	set := setOf(t, map[string]string{"001_family.sql": strings.ReplaceAll(deferredMigration, "TO OWNER", "TO "+pgx.Identifier{owner}.Sanitize())})
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)

	const shard = 1
	m := clustertest.ClusterMap(t, cfg)
	from, schema := m.Shards[shard].Host, m.Shards[shard].Schema
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	require.NoError(t, r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, `WITH p AS (INSERT INTO `+pgx.Identifier{s.Schema, "parent"}.Sanitize()+` (name) SELECT 'p' || g FROM generate_series(1, 50) g RETURNING id)
			INSERT INTO `+pgx.Identifier{s.Schema, "child"}.Sanitize()+` (parent_id, note) SELECT id, 'c' FROM p, generate_series(1, 4)`)
		return err
	}))
	wantTriggers := triggersOf(t, cfg, from, schema)
	require.Equal(t, []string{"child.t_always=A", "child.who_rows=O records who", "parent.t_disabled=D", "parent.t_replica=R", "parent.who_truncate=O"}, wantTriggers)
	fired := func(host string) int {
		var n int
		require.NoError(t, clustertest.HostPool(t, cfg, host).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM public.fired`).Scan(&n))
		return n
	}
	children := func() int {
		var n int
		require.NoError(t, r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			return tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{s.Schema, "child"}.Sanitize()).Scan(&n)
		}))
		return n
	}
	checkTarget := func(host string, firedBefore int) {
		t.Helper()
		require.Equal(t, host, clustertest.ClusterMap(t, cfg).Shards[shard].Host)
		require.Equal(t, wantTriggers, triggersOf(t, cfg, host, schema))
		require.Equal(t, firedBefore, fired(host), "a trigger fired on the target during the move")
		require.Equal(t, 200, children())
		var fks int
		require.NoError(t, clustertest.HostPool(t, cfg, host).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_constraint
			WHERE contype = 'f' AND conrelid = $1::regclass AND convalidated`, pgx.Identifier{schema, "child"}.Sanitize()).Scan(&fks))
		require.Equal(t, 1, fks)
	}

	// Online, stopped after the schema phase and resumed.
	opts := MoveOptions{Migrations: set, Keep: new(time.Duration), Logger: testLogger(t)}
	opts.stopAfter = PhaseSchema
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	opts.stopAfter = ""
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.NoError(t, err)
	checkTarget("pg4", 0)

	// Offline, back.
	before := fired(from)
	opts.Mode = MoveOffline
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, from, opts)
	require.NoError(t, err)
	checkTarget(from, before)

	// The triggers fire for the shard's writers, and the key holds.
	require.NoError(t, r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{s.Schema, "child"}.Sanitize()+` (parent_id) SELECT min(id) FROM `+pgx.Identifier{s.Schema, "parent"}.Sanitize())
		return err
	}))
	require.Equal(t, before+1, fired(from))
	err = r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{s.Schema, "child"}.Sanitize()+` (parent_id) VALUES (-1)`)
		return err
	})
	require.ErrorContains(t, err, "violates foreign key constraint")
	requireVerifyOK(t, cfg)
}

// A shard whose rows hold OIDs — an enum, a regclass, a regtype, arrays of
// them, an oid — moves online and offline: the copy carries such a table
// as text (binary COPY sends a regclass as the source's OID) and the
// checksums hash it as text (hash_record_extended hashes an enum by its
// OID, which differs per database). Failed before: at verified, the
// checksums differed.
func TestMoveShardWithOIDTypes(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	addHost(t, cfg, "pg4", "100ms")
	set := setOf(t, map[string]string{"001_kinds.sql": `
CREATE TYPE {{.schema}}.mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE {{.schema}}.ref (id bigint PRIMARY KEY DEFAULT {{.next_id}}, name text);
CREATE TABLE {{.schema}}.feelings (id bigint PRIMARY KEY DEFAULT {{.next_id}}, mood {{.schema}}.mood NOT NULL,
    moods {{.schema}}.mood[], rel regclass, typ regtype, n oid);`})
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	const shard = 2
	m := clustertest.ClusterMap(t, cfg)
	from, schema := m.Shards[shard].Host, m.Shards[shard].Schema
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	feelings := pgx.Identifier{schema, "feelings"}.Sanitize()
	require.NoError(t, r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+feelings+` (mood, moods, rel, typ, n)
			SELECT (ARRAY['sad', 'ok', 'happy'])[1 + g % 3]::`+pgx.Identifier{s.Schema, "mood"}.Sanitize()+`, ARRAY['ok', 'happy']::`+pgx.Identifier{s.Schema, "mood"}.Sanitize()+`[],
				$1::regclass, 'int8'::regtype, g FROM generate_series(1, 30) g`, pgx.Identifier{s.Schema, "ref"}.Sanitize())
		return err
	}))
	read := func() []string {
		var out []string
		require.NoError(t, r.Tx(clustertest.Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			rows, err := tx.Query(ctx, `SELECT format('%s %s %s %s %s', mood, moods, rel, typ, n) FROM `+feelings+` ORDER BY id`)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		}))
		return out
	}
	want := read()
	require.Contains(t, want[0], schema+".ref bigint")
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		to := "pg4"
		if mode == MoveOffline {
			to = from
		}
		_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, to, MoveOptions{Mode: mode, Migrations: set, Keep: new(time.Duration), Logger: testLogger(t)})
		require.NoError(t, err, mode)
		require.Equal(t, want, read(), mode)
	}
	requireVerifyOK(t, cfg)
}

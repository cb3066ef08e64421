package migrate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	gomigrate "github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	ternmigrate "github.com/jackc/tern/v2/migrate"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

func sampleSet(t testing.TB) *migrate.MigrationSet {
	t.Helper()
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	return set
}

// setOf loads a migration set from files given as name -> body.
func setOf(t testing.TB, files map[string]string) *migrate.MigrationSet {
	t.Helper()
	set, err := migrate.LoadMigrationSet(mapFS(files))
	require.NoError(t, err)
	return set
}

func mapFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys
}

const createLikes = `CREATE TABLE {{.schema}}.likes (id bigint PRIMARY KEY DEFAULT {{.next_id}}, post_id bigint NOT NULL);
---- create above / drop below ----
DROP TABLE {{.schema}}.likes;`

// shardPool returns a pool on the host that holds shard id.
func shardPool(t testing.TB, cfg *shardmgr.Config, m *shardmgr.ShardMap, id int) *pgxpool.Pool {
	return clustertest.HostPool(t, cfg, m.Shards[id].Host)
}

func statusVersions(t testing.TB, cfg *shardmgr.Config, set *migrate.MigrationSet) (*migrate.MigrationStatus, map[int]int) {
	t.Helper()
	st, err := migrate.ReadMigrationStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg), set)
	require.NoError(t, err)
	got := map[int]int{}
	for _, s := range st.Shards {
		require.NoError(t, s.Err, "shard %d", s.ID)
		got[s.Version]++
	}
	return st, got
}

func TestMigrationSetRender(t *testing.T) {
	set := sampleSet(t)
	require.Equal(t, 2, set.Latest())
	migs, err := set.Render(5, "shard_0005")
	require.NoError(t, err)
	require.Len(t, migs, 2)
	require.Equal(t, "001_create_likes.sql", migs[0].Name)
	require.Contains(t, migs[0].Up, "CREATE TABLE shard_0005.likes")
	require.Contains(t, migs[0].Up, "DEFAULT shard_0005.next_id()")
	require.Contains(t, migs[0].Up, "'likes of logical shard 5'")
	require.Equal(t, "DROP TABLE shard_0005.likes;", migs[0].Down)
	require.False(t, migs[0].UpNoTx)

	// Shared templates in a subfolder and sprig functions work as in tern.
	set = setOf(t, map[string]string{
		"shared/table.sql":   `CREATE TABLE {{.schema}}.{{.table}} (id bigint DEFAULT {{.next_id}});`,
		"001_two_tables.sql": `{{ template "shared/table.sql" (merge (dict "table" "a") .) }} {{ template "shared/table.sql" (merge (dict "table" "b") .) }} -- {{ upper .schema }}`,
	})
	migs, err = set.Render(7, "shard_0007")
	require.NoError(t, err)
	require.Equal(t, "CREATE TABLE shard_0007.a (id bigint DEFAULT shard_0007.next_id()); CREATE TABLE shard_0007.b (id bigint DEFAULT shard_0007.next_id()); -- SHARD_0007", migs[0].Up)
}

func TestMigrationSetBadInput(t *testing.T) {
	_, err := migrate.LoadMigrationDir(filepath.Join(t.TempDir(), "nope"))
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, "directory not found")

	_, err = migrate.LoadMigrationSet(mapFS(map[string]string{"README.md": "hi"}))
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, "no migration files")

	_, err = migrate.LoadMigrationSet(mapFS(map[string]string{"001_a.sql": "SELECT 1", "003_c.sql": "SELECT 3"}))
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, "Missing migration 2")

	_, err = migrate.LoadMigrationSet(mapFS(map[string]string{"001_a.sql": "SELECT {{ .schema "}))
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, "001_a.sql up")

	// tern alone would render "<no value>"; shardid refuses with the file,
	// the half and the line.
	_, err = migrate.LoadMigrationSet(mapFS(map[string]string{"001_a.sql": "SELECT 1;\n---- create above / drop below ----\nDROP TABLE {{.nope}};"}))
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, `001_a.sql down:1`)
	require.ErrorContains(t, err, `"nope"`)

	// A template that fails for one shard only is found when that shard
	// is rendered.
	set := setOf(t, map[string]string{"001_a.sql": "SELECT 1{{if eq .shard_id 3}}{{.nope}}{{end}};"})
	_, err = set.Render(2, "shard_0002")
	require.NoError(t, err)
	_, err = set.Render(3, "shard_0003")
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, "shard 3")
}

func TestMigrateUpDownStatus(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 12)
	m := clustertest.ClusterMap(t, cfg)
	set := sampleSet(t)

	var (
		mu       sync.Mutex
		progress = map[string]migrate.HostProgress{}
	)
	res, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{Progress: func(p migrate.HostProgress) {
		mu.Lock()
		defer mu.Unlock()
		progress[p.Host] = p
	}})
	require.NoError(t, err)
	require.Equal(t, migrate.Up, res.Direction)
	require.Equal(t, 2, res.Target)
	require.Len(t, res.Shards, 12)
	for i, s := range res.Shards {
		require.Equal(t, migrate.ShardMigration{ID: i, Host: m.Shards[i].Host, From: 0, To: 2, Applied: 2}, s)
	}
	require.Equal(t, map[string]migrate.HostProgress{
		"pg1": {Host: "pg1", Done: 4, Total: 4}, "pg2": {Host: "pg2", Done: 4, Total: 4}, "pg3": {Host: "pg3", Done: 4, Total: 4},
	}, progress)

	// The table is in every shard and takes its ids from the shard's own
	// generator.
	for _, s := range m.Shards {
		p := shardPool(t, cfg, m, s.ID)
		var id int64
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s.likes (user_id, post_id) VALUES (1, 2) RETURNING id`, s.Schema)).Scan(&id))
		require.Equal(t, s.ID, defaultShardOf(id))
		require.True(t, clustertest.TableExists(t, p, s.Schema+".likes_post_id_idx"))
	}

	// tern itself agrees on the version.
	conn, err := pgx.Connect(clustertest.Ctx(t), mustHost(t, cfg, m.Shards[5].Host).DSN)
	require.NoError(t, err)
	defer conn.Close(clustertest.Ctx(t))
	tm, err := ternmigrate.NewMigrator(clustertest.Ctx(t), conn, "shard_0005.schema_version")
	require.NoError(t, err)
	v, err := tm.GetCurrentVersion(clustertest.Ctx(t))
	require.NoError(t, err)
	require.EqualValues(t, 2, v)

	st, versions := statusVersions(t, cfg, set)
	require.Equal(t, 2, st.Latest)
	require.Equal(t, map[int]int{2: 12}, versions)
	require.Equal(t, migrate.ShardVersion{ID: 5, Host: m.Shards[5].Host, Version: 2}, st.Shards[5])
	sum := st.Summary()
	require.Empty(t, sum.Behind)
	require.Empty(t, sum.Failed)

	// Again: nothing to do.
	res, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	changed, unchanged, failed, stopped := res.Counts()
	require.Equal(t, [4]int{0, 12, 0, 0}, [4]int{changed, unchanged, failed, stopped})

	// Down one step on some shards, then all the way on all.
	res, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{Direction: migrate.Down, To: 1, Shards: []int{3, 4}})
	require.NoError(t, err)
	require.Len(t, res.Shards, 2)
	require.False(t, clustertest.TableExists(t, shardPool(t, cfg, m, 3), "shard_0003.likes_post_id_idx"))
	require.True(t, clustertest.TableExists(t, shardPool(t, cfg, m, 3), "shard_0003.likes"))
	st, versions = statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{2: 10, 1: 2}, versions)
	require.Equal(t, []int{3, 4}, st.Summary().Behind)

	// Up never moves a shard down: --to 1 leaves the shards at 2 alone.
	res, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{To: 1})
	require.NoError(t, err)
	changed, unchanged, _, _ = res.Counts()
	require.Equal(t, [2]int{0, 12}, [2]int{changed, unchanged})

	res, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{Direction: migrate.Down, To: 0})
	require.NoError(t, err)
	changed, _, _, _ = res.Counts()
	require.Equal(t, 12, changed)
	_, versions = statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{0: 12}, versions)
	for _, s := range m.Shards {
		require.False(t, clustertest.TableExists(t, shardPool(t, cfg, m, s.ID), s.Schema+".likes"))
	}

	// init --dir: Shards brings shards to the version of the others.
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{To: 1, Shards: []int{0, 1, 2}})
	require.NoError(t, err)
	res, err = migrate.Shards(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), []int{9, 10, 11}, migrate.Options{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Target)
	_, versions = statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{1: 6, 0: 6}, versions)
	res, err = migrate.Shards(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), nil, migrate.Options{})
	require.NoError(t, err)
	require.Equal(t, 1, res.Target)
	_, versions = statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{1: 12}, versions)
}

// defaultShardOf is the logical shard of an id in the default layout.
func defaultShardOf(id int64) int {
	return int((uint64(id) >> shsql.DefaultSeqBits) & (1<<shsql.DefaultShardBits - 1))
}

func mustHost(t testing.TB, cfg *shardmgr.Config, name string) shardmgr.Host {
	h, ok := cfg.Host(name)
	require.True(t, ok)
	return h
}

func TestMigrateBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	noVersionTables := func() {
		t.Helper()
		for _, s := range m.Shards {
			require.False(t, clustertest.TableExists(t, shardPool(t, cfg, m, s.ID), s.Schema+"."+migrate.VersionTable), "shard %d", s.ID)
		}
	}

	// A template that fails on one shard: nothing runs anywhere.
	set := setOf(t, map[string]string{
		"001_likes.sql": createLikes,
		"002_bad.sql":   "SELECT 1{{if eq .shard_id 4}}{{.nope}}{{end}};",
	})
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.ErrorIs(t, err, migrate.ErrMigrationSet)
	require.ErrorContains(t, err, "shard 4")
	noVersionTables()

	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{Shards: []int{1, 6}})
	require.ErrorIs(t, err, shardmgr.ErrUnknownShard)
	noVersionTables()

	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{To: 3})
	require.ErrorContains(t, err, "outside 0..2")
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{Direction: "sideways"})
	require.ErrorContains(t, err, "unknown direction")
	noVersionTables()

	// A shard whose schema is gone fails alone, with a clear error.
	_, err = shardPool(t, cfg, m, 2).Exec(clustertest.Ctx(t), `DROP SCHEMA shard_0002 CASCADE`)
	require.NoError(t, err)
	res, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	var perr *shardmgr.ShardErrors
	require.ErrorAs(t, err, &perr)
	require.Len(t, migrationErrors(t, perr), 1)
	require.Equal(t, 2, migrationErrors(t, perr)[0].Shard)
	require.ErrorIs(t, migrationErrors(t, perr)[0], migrate.ErrShardSchemaMissing)
	changed, _, failed, _ := res.Counts()
	require.Equal(t, [2]int{5, 1}, [2]int{changed, failed})
}

// failingSet makes migration 002 invalid SQL on shard bad only, after a
// statement that would leave a trace if the migration did not roll back.
func failingSet(t testing.TB, bad int) *migrate.MigrationSet {
	return setOf(t, map[string]string{
		"001_likes.sql": createLikes,
		"002_index.sql": fmt.Sprintf(`CREATE TABLE {{.schema}}.trace (x int);
CREATE INDEX likes_post_idx ON {{.schema}}.likes (post_id);
{{if eq .shard_id %d}}ALTER TABLE {{.schema}}.no_such_table ADD COLUMN y int;{{end}}
---- create above / drop below ----
DROP INDEX {{.schema}}.likes_post_idx; DROP TABLE {{.schema}}.trace;`, bad),
		"003_more.sql": `ALTER TABLE {{.schema}}.likes ADD COLUMN note text;
---- create above / drop below ----
ALTER TABLE {{.schema}}.likes DROP COLUMN note;`,
	})
}

var fixedSet = map[string]string{
	"001_likes.sql": createLikes,
	"002_index.sql": `CREATE TABLE {{.schema}}.trace (x int);
CREATE INDEX likes_post_idx ON {{.schema}}.likes (post_id);
---- create above / drop below ----
DROP INDEX {{.schema}}.likes_post_idx; DROP TABLE {{.schema}}.trace;`,
	"003_more.sql": `ALTER TABLE {{.schema}}.likes ADD COLUMN note text;
---- create above / drop below ----
ALTER TABLE {{.schema}}.likes DROP COLUMN note;`,
}

func TestMigrateFailureOnOneShardThenRerun(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 12)
	m := clustertest.ClusterMap(t, cfg)
	set := failingSet(t, 7)

	res, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	var perr *shardmgr.ShardErrors
	require.ErrorAs(t, err, &perr)
	require.Len(t, migrationErrors(t, perr), 1)
	f := migrationErrors(t, perr)[0]
	require.Equal(t, 7, f.Shard)
	require.Equal(t, m.Shards[7].Host, f.Host)
	require.Equal(t, 1, f.Version)
	require.Equal(t, "002_index.sql", f.Migration)
	require.Equal(t, migrate.Up, f.Direction)
	require.Equal(t, "42P01", f.SQLState) // undefined_table
	require.Contains(t, f.Message, `relation "shard_0007.no_such_table" does not exist`)
	require.False(t, f.Partial)
	require.Contains(t, err.Error(), "1 of 12 shards failed; shard 7 on "+m.Shards[7].Host+" stopped at version 1: 002_index.sql (up)")
	var me *migrate.MigrationError
	require.ErrorAs(t, err, &me)

	// The others carried on to the end; shard 7 rolled 002 back entirely.
	require.Equal(t, migrate.ShardMigration{ID: 7, Host: m.Shards[7].Host, From: 0, To: 1, Applied: 1, Err: f}, res.Shards[7])
	for _, s := range res.Shards {
		if s.ID != 7 {
			require.Equal(t, 3, s.To, "shard %d", s.ID)
		}
	}
	p := shardPool(t, cfg, m, 7)
	require.True(t, clustertest.TableExists(t, p, "shard_0007.likes"))
	require.False(t, clustertest.TableExists(t, p, "shard_0007.trace"))
	require.False(t, clustertest.TableExists(t, p, "shard_0007.likes_post_idx"))

	// status says so.
	st, versions := statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{3: 11, 1: 1}, versions)
	fail := st.Shards[7].Failure
	require.NotNil(t, fail)
	require.Equal(t, "failed", fail.State)
	require.Equal(t, 1, fail.Version)
	require.Equal(t, "002_index.sql", fail.Migration)
	require.Equal(t, "42P01", fail.SQLState)
	sum := st.Summary()
	require.Equal(t, []int{7}, sum.Failed)
	require.Equal(t, []int{7}, sum.Behind)

	// Running the broken set again fails the same way and changes nothing else.
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.ErrorAs(t, err, &perr)
	require.Len(t, migrationErrors(t, perr), 1)

	// After the fix, up finishes the rest and clears the failure.
	fixed := setOf(t, fixedSet)
	res, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), fixed, migrate.Options{})
	require.NoError(t, err)
	changed, unchanged, _, _ := res.Counts()
	require.Equal(t, [2]int{1, 11}, [2]int{changed, unchanged})
	require.Equal(t, migrate.ShardMigration{ID: 7, Host: m.Shards[7].Host, From: 1, To: 3, Applied: 2}, res.Shards[7])
	st, versions = statusVersions(t, cfg, fixed)
	require.Equal(t, map[int]int{3: 12}, versions)
	require.Nil(t, st.Shards[7].Failure)
}

func TestMigrateFailFast(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 12)
	m := clustertest.ClusterMap(t, cfg)
	set := failingSet(t, 0) // pg1 holds 0..3; with one worker 0 runs first there

	res, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{FailFast: true, Workers: 1})
	var perr *shardmgr.ShardErrors
	require.ErrorAs(t, err, &perr)
	require.Len(t, migrationErrors(t, perr), 1)
	require.Equal(t, 0, migrationErrors(t, perr)[0].Shard)
	require.GreaterOrEqual(t, perr.Stopped, 3)
	require.Contains(t, err.Error(), "not started after the first failure (fail-fast)")
	for _, id := range []int{1, 2, 3} {
		require.True(t, res.Shards[id].Stopped, "shard %d", id)
		require.Equal(t, 0, res.Shards[id].Applied)
	}
	_, _, failed, stopped := res.Counts()
	require.Equal(t, 1, failed)
	require.Equal(t, perr.Stopped, stopped)
	for _, id := range []int{1, 2, 3} {
		require.False(t, clustertest.TableExists(t, shardPool(t, cfg, m, id), m.Shards[id].Schema+".likes"))
	}

	// Without --fail-fast after the fix, everything gets there.
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), setOf(t, fixedSet), migrate.Options{})
	require.NoError(t, err)
	_, versions := statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{3: 12}, versions)
}

func TestMigrateDisableTx(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	set := setOf(t, map[string]string{
		"001_likes.sql": createLikes,
		"002_concurrently.sql": `---- tern: disable-tx ----
CREATE INDEX CONCURRENTLY likes_post_idx ON {{.schema}}.likes (post_id);
CREATE TABLE {{.schema}}.trace (x int);
{{if eq .shard_id 3}}SELECT no_such_function();{{end}}
---- create above / drop below ----
---- tern: disable-tx ----
DROP INDEX CONCURRENTLY {{.schema}}.likes_post_idx;
DROP TABLE {{.schema}}.trace;`,
	})
	res, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{LockTimeout: 5 * time.Second})
	var perr *shardmgr.ShardErrors
	require.ErrorAs(t, err, &perr)
	require.Len(t, migrationErrors(t, perr), 1)
	f := migrationErrors(t, perr)[0]
	require.Equal(t, 3, f.Shard)
	require.True(t, f.Partial)
	require.Equal(t, "42883", f.SQLState) // undefined_function
	require.Contains(t, f.Message, "statement 3 of 3")
	require.Equal(t, 1, res.Shards[3].To)

	// The index really was built concurrently on the others, and status
	// shows that shard 3 is half way, not just behind.
	for _, s := range m.Shards {
		require.True(t, clustertest.TableExists(t, shardPool(t, cfg, m, s.ID), s.Schema+".likes_post_idx"))
	}
	st, err := migrate.ReadMigrationStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg), set)
	require.NoError(t, err)
	require.Equal(t, 1, st.Shards[3].Version)
	require.NotNil(t, st.Shards[3].Failure)
	require.True(t, st.Shards[3].Failure.Partial)
	require.Equal(t, "failed", st.Shards[3].Failure.State)

	// A disable-tx migration killed half way shows as interrupted.
	p := shardPool(t, cfg, m, 4)
	_, err = p.Exec(clustertest.Ctx(t), `INSERT INTO shard_0004.schema_version_failure (version, migration, direction, state, partial, sqlstate, message)
		VALUES (2, '003_x.sql', 'up', 'running', true, '', 'running')`)
	require.NoError(t, err)
	st, err = migrate.ReadMigrationStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg), set)
	require.NoError(t, err)
	require.Equal(t, "interrupted", st.Shards[4].Failure.State)
	_, err = p.Exec(clustertest.Ctx(t), `DELETE FROM shard_0004.schema_version_failure`)
	require.NoError(t, err)

	// Down runs statement by statement too.
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{Direction: migrate.Down, To: 1, Shards: []int{0, 1}})
	require.NoError(t, err)
	require.False(t, clustertest.TableExists(t, shardPool(t, cfg, m, 0), "shard_0000.likes_post_idx"))
}

func TestMigrateConcurrentRunsDoNotInterleave(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	// Each step sleeps so that the two runs overlap on every shard, and
	// would collide ("already exists") if they interleaved. Shard 0's
	// second step also passes a gate the test holds closed until one run
	// says it waits: the two runs always meet there, however loaded the
	// machine (under load one run could finish before the other started).
	set := setOf(t, map[string]string{
		"001_likes.sql": createLikes + "\n",
		"002_sleep.sql": `{{if eq .shard_id 0}}SELECT pg_advisory_xact_lock_shared(4242);{{end}} SELECT pg_sleep(0.1); CREATE TABLE {{.schema}}.b (x int);`,
		"003_sleep.sql": `SELECT pg_sleep(0.1); CREATE TABLE {{.schema}}.c (x int);`,
	})
	gate, err := pgx.Connect(clustertest.Ctx(t), mustHost(t, cfg, m.Shards[0].Host).DSN)
	require.NoError(t, err)
	defer gate.Close(context.Background())
	_, err = gate.Exec(clustertest.Ctx(t), `SELECT pg_advisory_lock(4242)`)
	require.NoError(t, err)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		waits  []migrate.LockWait
		res    [2]*migrate.Result
		errs   [2]error
		waited = make(chan struct{})
		once   sync.Once
	)
	for i := range 2 {
		wg.Go(func() {
			res[i], errs[i] = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{Workers: 2, Waiting: func(w migrate.LockWait) {
				mu.Lock()
				defer mu.Unlock()
				waits = append(waits, w)
				once.Do(func() { close(waited) })
			}})
		})
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Minute):
		t.Error("no run said it waited for the other within 5 minutes")
	}
	_, err = gate.Exec(clustertest.Ctx(t), `SELECT pg_advisory_unlock(4242)`)
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.NotEmpty(t, waits, "one run must have waited for the other")
	for _, w := range waits {
		require.Equal(t, m.Shards[w.Shard].Host, w.Host)
		require.NotZero(t, w.HolderPID)
	}
	for id := range m.Shards {
		a, b := res[0].Shards[id], res[1].Shards[id]
		require.Equal(t, 3, a.Applied+b.Applied, "shard %d: every migration ran exactly once", id)
		require.Equal(t, 3, a.To)
		require.Equal(t, 3, b.To)
	}
	_, versions := statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{3: 6}, versions)
}

func TestRenderFormatsApplyWithTernAndGolangMigrate(t *testing.T) {
	t.Parallel()
	set := sampleSet(t)
	migs, err := set.Render(5, "shard_0005")
	require.NoError(t, err)
	_, err = migrate.WriteRendered(t.TempDir(), "flyway", migs)
	require.ErrorContains(t, err, "unknown format")

	// A database with just shard 5's generator, as shardid sql function
	// would install it.
	server := pgtest.Servers(t, 1)[0]
	newShardDB := func() string {
		dsn := pgtest.NewDB(t, server)
		ddl, err := shsql.Render(shsql.Params{Shard: 5})
		require.NoError(t, err)
		_, err = clustertest.Pool(t, dsn).Exec(clustertest.Ctx(t), ddl, pgx.QueryExecModeSimpleProtocol)
		require.NoError(t, err)
		return dsn
	}

	t.Run("golang-migrate", func(t *testing.T) {
		out := t.TempDir()
		paths, err := migrate.WriteRendered(out, migrate.FormatGolangMigrate, migs)
		require.NoError(t, err)
		names := []string{}
		for _, p := range paths {
			names = append(names, filepath.Base(p))
		}
		require.Equal(t, []string{"001_create_likes.up.sql", "001_create_likes.down.sql", "002_add_likes_post_index.up.sql", "002_add_likes_post_index.down.sql"}, names)

		dsn := newShardDB()
		src, err := iofs.New(os.DirFS(out), ".")
		require.NoError(t, err)
		// The URL a user passes to the migrate CLI: pgx5:// with the
		// version table in the shard's schema.
		url := strings.Replace(dsn, "postgres://", "pgx5://", 1) + `&x-migrations-table="shard_0005"."schema_migrations"&x-migrations-table-quoted=1`
		gm, err := gomigrate.NewWithSourceInstance("iofs", src, url)
		require.NoError(t, err)
		defer gm.Close()
		require.NoError(t, gm.Up())
		v, dirty, err := gm.Version()
		require.NoError(t, err)
		require.False(t, dirty)
		require.EqualValues(t, 2, v)
		p := clustertest.Pool(t, dsn)
		var id int64
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), `INSERT INTO shard_0005.likes (user_id, post_id) VALUES (1, 2) RETURNING id`).Scan(&id))
		require.Equal(t, 5, defaultShardOf(id))
		require.True(t, clustertest.TableExists(t, p, "shard_0005.likes_post_id_idx"))
		require.NoError(t, gm.Down())
		require.False(t, clustertest.TableExists(t, p, "shard_0005.likes"))
	})

	t.Run("tern", func(t *testing.T) {
		out := t.TempDir()
		paths, err := migrate.WriteRendered(out, migrate.FormatTern, migs)
		require.NoError(t, err)
		require.Len(t, paths, 2)
		body, err := os.ReadFile(paths[0])
		require.NoError(t, err)
		require.NotContains(t, string(body), "{{")

		dsn := newShardDB()
		conn, err := pgx.Connect(clustertest.Ctx(t), dsn)
		require.NoError(t, err)
		defer conn.Close(clustertest.Ctx(t))
		tm, err := ternmigrate.NewMigrator(clustertest.Ctx(t), conn, "shard_0005.schema_version")
		require.NoError(t, err)
		require.NoError(t, tm.LoadMigrations(os.DirFS(out)))
		require.NoError(t, tm.Migrate(clustertest.Ctx(t)))
		p := clustertest.Pool(t, dsn)
		require.True(t, clustertest.TableExists(t, p, "shard_0005.likes_post_id_idx"))
		// shardid reads the version tern wrote.
		v, fail, err := migrate.ReadShardVersion(clustertest.Ctx(t), p, "shard_0005")
		require.NoError(t, err)
		require.Equal(t, 2, v)
		require.Nil(t, fail)
	})
}

func TestMigrateShardOn(t *testing.T) {
	t.Parallel()
	// A move builds a shard on a database the catalog does not name yet.
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	ddl, err := shsql.Render(shsql.Params{Shard: 9})
	require.NoError(t, err)
	_, err = clustertest.Pool(t, dsn).Exec(clustertest.Ctx(t), ddl, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	conn, err := pgx.Connect(clustertest.Ctx(t), dsn)
	require.NoError(t, err)
	defer conn.Close(clustertest.Ctx(t))
	res, err := migrate.ShardOn(clustertest.Ctx(t), conn, "new", sampleSet(t), shardmgr.Shard{ID: 9, Schema: "shard_0009"}, migrate.Options{To: 1})
	require.NoError(t, err)
	require.Equal(t, migrate.ShardMigration{ID: 9, Host: "new", From: 0, To: 1, Applied: 1}, res)
	v, _, err := migrate.ReadShardVersion(clustertest.Ctx(t), conn, "shard_0009")
	require.NoError(t, err)
	require.Equal(t, 1, v)
}

func TestMigrateUnreachableHostAndMovingShard(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	set := sampleSet(t)
	_, err := catalog.SetShardState(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog), 1, shardmgr.StateMoving, 0)
	require.NoError(t, err)

	// pg3 goes away: its shards fail with the connection error, the other
	// hosts carry on.
	down := *cfg
	down.Hosts = append([]shardmgr.Host(nil), cfg.Hosts...)
	down.Hosts[2].DSN = "postgres://postgres@127.0.0.1:1/nope?sslmode=disable&connect_timeout=2"
	res, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, &down), set, migrate.Options{})
	var perr *shardmgr.ShardErrors
	require.ErrorAs(t, err, &perr)
	failed := map[int]*migrate.MigrationError{}
	for _, f := range migrationErrors(t, perr) {
		failed[f.Shard] = f
	}
	require.Len(t, failed, 3) // 1 (moving), 4 and 5 (pg3)
	require.ErrorIs(t, failed[1], shardmgr.ErrShardMoving)
	for _, id := range m.ShardsOn("pg3") {
		require.Equal(t, -1, failed[id].Version)
		require.Contains(t, failed[id].Message, "connect to host pg3")
	}
	for _, id := range []int{0, 2, 3} {
		require.Equal(t, 2, res.Shards[id].To)
	}

	st, err := migrate.ReadMigrationStatus(clustertest.Ctx(t), clustertest.Handle(t, &down), set)
	require.NoError(t, err)
	require.Equal(t, []int{4, 5}, st.Summary().Unreadable)
	require.Equal(t, -1, st.Shards[4].Version)
	require.ErrorContains(t, st.Shards[4].Err, "connect to host pg3")

	// Back to normal: the move is over and pg3 answers; up finishes.
	_, err = catalog.SetShardState(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog), 1, shardmgr.StateActive, 0)
	require.NoError(t, err)
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	_, versions := statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{2: 6}, versions)
}

func TestMigrateInterrupted(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 12)
	set := setOf(t, map[string]string{
		"001_likes.sql": createLikes,
		"002_slow.sql":  `CREATE TABLE {{.schema}}.slow (x int); SELECT pg_sleep(0.2);`,
	})
	// Interrupted once the first shard is done, whatever the machine's
	// speed (a fixed deadline ran out before the run began on a loaded
	// machine): the others are in the middle of a step or not started.
	c, cancel := context.WithCancel(clustertest.Ctx(t))
	defer cancel()
	res, err := migrate.Migrate(c, clustertest.Handle(t, cfg), set, migrate.Options{Workers: 1, Progress: func(p migrate.HostProgress) {
		if p.Done > 0 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "migrate up interrupted after")
	require.NotNil(t, res)
	require.Less(t, len(res.Shards), 12)

	// Every shard is cleanly before or after each step: the step that was
	// running rolled back, and nothing is recorded as failed.
	st, err := migrate.ReadMigrationStatus(clustertest.Ctx(t), clustertest.Handle(t, cfg), set)
	require.NoError(t, err)
	m := clustertest.ClusterMap(t, cfg)
	for _, s := range st.Shards {
		require.Nil(t, s.Failure, "shard %d", s.ID)
		require.Equal(t, s.Version >= 2, clustertest.TableExists(t, shardPool(t, cfg, m, s.ID), m.Shards[s.ID].Schema+".slow"), "shard %d", s.ID)
	}
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	_, versions := statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{2: 12}, versions)
}

func TestMigrateLockTimeout(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	m := clustertest.ClusterMap(t, cfg)
	set := setOf(t, fixedSet)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{To: 2})
	require.NoError(t, err)

	// A long transaction reads shard 2's table: 003's ALTER TABLE would
	// wait for it, and every writer would queue behind the ALTER.
	tx, err := shardPool(t, cfg, m, 2).Begin(clustertest.Ctx(t))
	require.NoError(t, err)
	_, err = tx.Exec(clustertest.Ctx(t), `SELECT count(*) FROM shard_0002.likes`)
	require.NoError(t, err)
	res, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{LockTimeout: 200 * time.Millisecond})
	var perr *shardmgr.ShardErrors
	require.ErrorAs(t, err, &perr)
	require.Len(t, migrationErrors(t, perr), 1)
	require.Equal(t, 2, migrationErrors(t, perr)[0].Shard)
	require.Equal(t, "55P03", migrationErrors(t, perr)[0].SQLState) // lock_not_available
	require.Equal(t, 2, res.Shards[2].To)
	require.NoError(t, tx.Rollback(clustertest.Ctx(t)))

	// The setting does not leak into the session: later work is unaffected.
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	_, versions := statusVersions(t, cfg, set)
	require.Equal(t, map[int]int{3: 6}, versions)
}

package rebalance

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/grants"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/verify"
)

// grantsSet is the sample migrations and a trigger function that the
// operator's own trigger (made by hand, not by a migration) calls.
func grantsSet(t *testing.T) *migrate.MigrationSet {
	t.Helper()
	files := map[string]string{"003_touch.sql": `CREATE FUNCTION {{.schema}}.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.created_at := coalesce(NEW.created_at, now()); RETURN NEW; END $$;`}
	for _, name := range []string{"001_create_likes.sql", "002_add_likes_post_index.sql"} {
		b, err := os.ReadFile(filepath.Join(clustertest.SampleMigrations, name))
		require.NoError(t, err)
		files[name] = string(b)
	}
	return setOf(t, files)
}

// grantApp sets shard schemas up as an operator would for an application
// role app (USAGE, SELECT and INSERT), and gives them what else a user
// relies on: a table owner of its own, a column privilege, default
// privileges, a routine's privileges, a comment, row-level security with
// a policy, and a trigger made by hand.
func grantApp(t *testing.T, cfg *shardmgr.Config, app, owner string) {
	t.Helper()
	qa, qo := pgx.Identifier{app}.Sanitize(), pgx.Identifier{owner}.Sanitize()
	for _, s := range clustertest.ClusterMap(t, cfg).Shards {
		qs := pgx.Identifier{s.Schema}.Sanitize()
		_, err := clustertest.HostPool(t, cfg, s.Host).Exec(clustertest.Ctx(t), strings.NewReplacer("{s}", qs, "{app}", qa, "{owner}", qo).Replace(`
			GRANT USAGE ON SCHEMA {s} TO {app};
			GRANT SELECT, INSERT ON {s}.likes TO {app};
			GRANT UPDATE (post_id) ON {s}.likes TO {app};
			ALTER TABLE {s}.likes OWNER TO {owner};
			ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {s} GRANT SELECT ON TABLES TO {app};
			REVOKE EXECUTE ON FUNCTION {s}.touch() FROM PUBLIC;
			GRANT EXECUTE ON FUNCTION {s}.touch() TO {app};
			COMMENT ON COLUMN {s}.likes.post_id IS 'the post liked';
			ALTER TABLE {s}.likes ENABLE ROW LEVEL SECURITY;
			CREATE POLICY app_rows ON {s}.likes TO {app} USING (user_id >= 0) WITH CHECK (user_id >= 0);
			CREATE TRIGGER likes_touch BEFORE INSERT ON {s}.likes FOR EACH ROW EXECUTE FUNCTION {s}.touch();
			CREATE TRIGGER likes_touch_off BEFORE UPDATE ON {s}.likes FOR EACH ROW EXECUTE FUNCTION {s}.touch();
			ALTER TABLE {s}.likes DISABLE TRIGGER likes_touch_off`))
		require.NoError(t, err, s.Schema)
	}
}

// appWriters write and read one shard through a router that connects as
// an application role, until stopped: every error other than the typed
// refusal is kept.
type appWriters struct {
	mu       sync.Mutex
	ok       int
	refused  int
	failures []error
	stop     func()
}

func writeAsApp(r *shardmgr.Router, shard, n int) *appWriters {
	w := &appWriters{}
	c, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for j := 0; c.Err() == nil; j++ {
				var id int64
				err := r.Tx(c, shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					return tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES ($1, $2) RETURNING id`, s.Table("likes")), i, j).Scan(&id)
				})
				if err == nil {
					err = r.ReadTx(c, shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
						var n int
						if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE id = $1`, s.Table("likes")), id).Scan(&n); err != nil {
							return err
						}
						if n != 1 {
							return fmt.Errorf("id %d written, read back %d times", id, n)
						}
						return nil
					})
				}
				if c.Err() != nil {
					return
				}
				w.mu.Lock()
				switch {
				case err == nil:
					w.ok++
				case errors.Is(err, shardmgr.ErrShardMoving):
					w.refused++
				default:
					w.failures = append(w.failures, err)
				}
				w.mu.Unlock()
				if err != nil {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}
	w.stop = func() { cancel(); wg.Wait() }
	return w
}

func (w *appWriters) counts() (ok, refused int, failures []error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok, w.refused, append([]error(nil), w.failures...)
}

// readGrants reads what shard's copy named schema on host carries.
func readGrants(t *testing.T, cfg *shardmgr.Config, host, schema string) *grants.Schema {
	t.Helper()
	g, err := grants.ReadDB(clustertest.Ctx(t), clustertest.HostPool(t, cfg, host), schema, shardToolkit)
	require.NoError(t, err)
	return g
}

// TestMoveKeepsGrants moves shards away and back, online and offline,
// while an application role that is not the mover's writes and reads them
// through the router: it sees no error but the typed refusal, its writes
// resume after each move, and each new copy carries what the old one did
// (owners, privileges, default privileges, row-level security and its
// policy, the hand-made triggers, comments). The role has no right in the
// shardid schema, where an online move logs changes. verify compares the
// privileges of the shard with its retired copy and names a difference.
func TestMoveKeepsGrants(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 8)
	set := grantsSet(t)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	app := clustertest.Role(t, cfg, "app")
	owner := clustertest.Role(t, cfg, "likes_owner")
	grantApp(t, cfg, app, owner)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond), shardmgr.WithPoolConfig(func(_ string, c *pgxpool.Config) {
		c.ConnConfig.User = app
	}))
	keep := time.Hour
	for _, tc := range []struct {
		mode  MoveMode
		shard int
	}{{MoveOnline, 7}, {MoveOffline, 6}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			m := clustertest.ClusterMap(t, cfg)
			schema, home := m.Shards[tc.shard].Schema, m.Shards[tc.shard].Host
			away := "pg3"
			if home == away {
				away = "pg2"
			}
			want := readGrants(t, cfg, home, schema)
			require.NotEmpty(t, want.Policies)
			require.Len(t, want.Triggers, 2)
			w := writeAsApp(r, tc.shard, 2)
			defer w.stop()
			waitWrites := func(after string) {
				ok, _, _ := w.counts()
				require.Eventually(t, func() bool { n, _, f := w.counts(); return n > ok+10 || len(f) > 0 }, 2*time.Minute, 10*time.Millisecond,
					"the application's writes did not resume after %s", after)
				_, _, failures := w.counts()
				require.Empty(t, failures, "after %s the application saw errors other than ErrShardMoving", after)
			}
			waitWrites("the start")
			opts := MoveOptions{Mode: tc.mode, Migrations: set, Keep: &keep}
			_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), tc.shard, away, opts)
			require.NoError(t, err)
			waitWrites("the move away")
			require.Empty(t, grants.Compare(want, readGrants(t, cfg, away, schema)), "the copy on %s", away)
			got := readGrants(t, cfg, away, schema)
			require.Equal(t, want.Policies, got.Policies)
			require.Equal(t, want.Triggers, got.Triggers)
			require.Equal(t, want.Comments, got.Comments)

			_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), tc.shard, home, opts)
			require.NoError(t, err)
			waitWrites("the move back")
			w.stop()
			ok, refused, failures := w.counts()
			t.Logf("%s: %d writes and reads, %d refused (ErrShardMoving), %d failed", tc.mode, ok, refused, len(failures))
			require.Empty(t, failures, "the application saw errors other than ErrShardMoving")
			require.Empty(t, grants.Compare(want, readGrants(t, cfg, home, schema)), "the copy back on %s", home)
		})
	}

	// verify compares the shard's privileges with its retired copy's.
	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "verify: %v", rep.Problems)
	m := clustertest.ClusterMap(t, cfg)
	_, err = clustertest.HostPool(t, cfg, m.Shards[7].Host).Exec(clustertest.Ctx(t), fmt.Sprintf(`REVOKE INSERT ON %s FROM %s`,
		pgx.Identifier{m.Shards[7].Schema, "likes"}.Sanitize(), pgx.Identifier{app}.Sanitize()))
	require.NoError(t, err)
	rep, err = verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	var found []string
	for _, p := range rep.Problems {
		if p.Check == verify.CheckGrants {
			require.Equal(t, 7, p.Shard)
			found = append(found, p.Detail)
		}
	}
	require.Len(t, found, 1, "%v", rep.Problems)
	require.Contains(t, found[0], "table likes")
	require.Contains(t, found[0], app+":INSERT")
}

// TestMoveMissingRoleRefused: a target host that lacks a role the shard's
// grants name refuses the move, naming the role, before any row is copied.
func TestMoveMissingRoleRefused(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 4) // pg4 is a server of this test's own
	app := clustertest.Role(t, cfg, "app")
	m := clustertest.ClusterMap(t, cfg)
	s := m.Shards[1]
	_, err := clustertest.HostPool(t, cfg, s.Host).Exec(clustertest.Ctx(t), fmt.Sprintf(`GRANT USAGE ON SCHEMA %s TO %s`,
		pgx.Identifier{s.Schema}.Sanitize(), pgx.Identifier{app}.Sanitize()))
	require.NoError(t, err)
	h, _ := cfg.Host("pg4")
	u, err := url.Parse(h.DSN)
	require.NoError(t, err)
	u.Path = "/postgres" // pg4's database is made by the move
	_, err = clustertest.Pool(t, u.String()).Exec(clustertest.Ctx(t), `DROP ROLE `+pgx.Identifier{app}.Sanitize())
	require.NoError(t, err)
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, ErrMissingRole)
	require.ErrorContains(t, err, app)
	var made bool
	require.NoError(t, clustertest.HostPool(t, cfg, "pg4").QueryRow(clustertest.Ctx(t), `SELECT to_regnamespace($1) IS NOT NULL`, s.Schema).Scan(&made))
	require.False(t, made, "the refused move built its target")
	_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{1})
	require.NoError(t, err)
	require.Equal(t, s.Host, clustertest.ClusterMap(t, cfg).Shards[1].Host)
}

// An application role is refused by an incoming copy and by a retired one
// whatever setting it gives itself (SET, ALTER ROLE ... SET, options in
// its connection string), though it holds INSERT on both.
func TestFenceRefusesApplicationOnCopies(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 4)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	app := clustertest.Role(t, cfg, "app")
	qa := pgx.Identifier{app}.Sanitize()
	m := clustertest.ClusterMap(t, cfg)
	for _, s := range m.Shards {
		_, err := clustertest.HostPool(t, cfg, s.Host).Exec(clustertest.Ctx(t), fmt.Sprintf(`GRANT USAGE ON SCHEMA %[1]s TO %[2]s; GRANT SELECT, INSERT ON %[1]s.likes TO %[2]s`,
			pgx.Identifier{s.Schema}.Sanitize(), qa))
		require.NoError(t, err)
	}
	s := m.Shards[2]
	home, away := s.Host, "pg3"
	if home == away {
		away = "pg1"
	}
	tryAll := func(host, schema, what string) {
		h, ok := cfg.Host(host)
		require.True(t, ok)
		dsn := clustertest.AsRole(t, h.DSN, app)
		insert := func(dsn string, pre string) error {
			conn, err := pgx.Connect(clustertest.Ctx(t), dsn)
			require.NoError(t, err)
			defer conn.Close(clustertest.Ctx(t))
			if pre != "" {
				_, err := conn.Exec(clustertest.Ctx(t), pre)
				require.NoError(t, err)
			}
			var on string
			require.NoError(t, conn.QueryRow(clustertest.Ctx(t), `SELECT coalesce(current_setting('shardid.fence_bypass', true), '')`).Scan(&on))
			require.Equal(t, "on", on, "%s: the setting took", what)
			_, err = conn.Exec(clustertest.Ctx(t), fmt.Sprintf(`INSERT INTO %s (id, user_id, post_id) VALUES (1, 1, 1)`, pgx.Identifier{schema, "likes"}.Sanitize()))
			return err
		}
		err := insert(dsn, `SET shardid.fence_bypass = on`)
		require.True(t, fence.IsFenceError(err), "%s, SET: %v", what, err)
		err = insert(dsn+"&options=-c%20shardid.fence_bypass%3Don", "")
		require.True(t, fence.IsFenceError(err), "%s, options: %v", what, err)
		_, err = clustertest.HostPool(t, cfg, host).Exec(clustertest.Ctx(t), `ALTER ROLE `+qa+` SET shardid.fence_bypass = on`)
		require.NoError(t, err)
		defer clustertest.HostPool(t, cfg, host).Exec(clustertest.Ctx(t), `ALTER ROLE `+qa+` RESET shardid.fence_bypass`)
		err = insert(dsn, "")
		require.True(t, fence.IsFenceError(err), "%s, ALTER ROLE SET: %v", what, err)
	}
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		keep := time.Hour
		opts := MoveOptions{Mode: mode, Migrations: sampleSet(t), Keep: &keep}
		opts.stopAfter = PhaseCopy
		_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 2, away, opts)
		require.ErrorIs(t, err, errStopped)
		tryAll(away, s.Schema, string(mode)+" incoming copy")
		opts.stopAfter = ""
		_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 2, away, opts)
		require.NoError(t, err)
		var retired string
		require.NoError(t, clustertest.HostPool(t, cfg, home).QueryRow(clustertest.Ctx(t), `SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 ORDER BY oid DESC LIMIT 1`,
			s.Schema+`\_moved\_g%`).Scan(&retired))
		tryAll(home, retired, string(mode)+" retired copy")
		home, away = away, home
	}

	// A retired copy fenced by an older release (a function that lets a
	// write through on the setting) is named by verify.
	requireVerifyOK(t, cfg)
	var retired string
	require.NoError(t, clustertest.HostPool(t, cfg, away).QueryRow(clustertest.Ctx(t), `SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 ORDER BY oid DESC LIMIT 1`,
		s.Schema+`\_moved\_g%`).Scan(&retired))
	_, err = clustertest.HostPool(t, cfg, away).Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY INVOKER AS $$
BEGIN IF current_setting('shardid.fence_bypass', true) = 'on' THEN RETURN NULL; END IF; RAISE EXCEPTION USING ERRCODE = 'SIDFN'; END $$`,
		pgx.Identifier{retired, "shardid_fence"}.Sanitize()))
	require.NoError(t, err)
	rep, err := verify.Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.Len(t, rep.Problems, 1, "%v", rep.Problems)
	require.Equal(t, verify.CheckPlacement, rep.Problems[0].Check)
	require.Contains(t, rep.Problems[0].Detail, retired+" of shard 2 has an older release's fence")
}

// A role with CREATE on a shard's schema (a migration role) that made a
// function named like the fence before the move cannot have the move
// keep it: the move refuses, naming the function and its owner, and the
// shard stays where it is; an abort leaves it serving.
func TestMoveRefusesForeignFenceFunction(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 2)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	migrator := clustertest.Role(t, cfg, "migrator")
	s := clustertest.ClusterMap(t, cfg).Shards[0]
	src := clustertest.HostPool(t, cfg, s.Host)
	_, err = src.Exec(clustertest.Ctx(t), fmt.Sprintf(`GRANT USAGE, CREATE ON SCHEMA %s TO %s`, pgx.Identifier{s.Schema}.Sanitize(), pgx.Identifier{migrator}.Sanitize()))
	require.NoError(t, err)
	h, _ := cfg.Host(s.Host)
	conn, err := pgx.Connect(clustertest.Ctx(t), clustertest.AsRole(t, h.DSN, migrator))
	require.NoError(t, err)
	defer conn.Close(clustertest.Ctx(t))
	away := "pg3"
	if s.Host == away {
		away = "pg2"
	}
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		// (An abort drops the fence function, whoever made it.)
		_, err = conn.Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
			pgx.Identifier{s.Schema, "shardid_fence"}.Sanitize()))
		require.NoError(t, err)
		_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, away, MoveOptions{Mode: mode, Migrations: sampleSet(t)})
		require.ErrorIs(t, err, ErrForeignOwner, mode)
		var used bool
		require.NoError(t, src.QueryRow(clustertest.Ctx(t), `SELECT EXISTS (SELECT FROM pg_trigger WHERE tgfoid = to_regprocedure($1))`,
			s.Schema+".shardid_fence()").Scan(&used))
		require.False(t, used, "%s: a trigger calls the foreign function", mode)
		require.ErrorContains(t, err, s.Schema+".shardid_fence()")
		require.ErrorContains(t, err, migrator)
		_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{0})
		require.NoError(t, err)
		require.Equal(t, s.Host, clustertest.ClusterMap(t, cfg).Shards[0].Host)
	}
}

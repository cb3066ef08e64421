package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// like is what examples/python/route_like.py and examples/node/route_like.js print.
type like struct {
	Key    string `json:"key"`
	Shard  int    `json:"shard"`
	Host   string `json:"host"`
	Schema string `json:"schema"`
	ID     string `json:"id"`
	MS     int64  `json:"ms"`
	IDShrd int    `json:"shard_of_id"`
}

// exampleRunners are the commands that run each language's example, and
// what is missing when one cannot run (scripts/ensure-examples sets both
// up; make test runs it).
var exampleRunners = map[string][]string{
	"python": {"/usr/bin/python3", "python/route_like.py"},
	"node":   {"node", "node/route_like.js"},
}

// TestLanguageExamplesRoute: the Python and Node examples of docs/routing.md
// route a string key as the Go router does (the same FNV-1a shard), insert
// through the shard's DEFAULT on the host shardid.routes names, decode the
// id to the same shard, and follow the shard when it moves, reading the
// catalog as a role with only CONNECT and SELECT on shardid.routes and
// shardid.catalog_readers.
func TestLanguageExamplesRoute(t *testing.T) {
	if _, err := os.Stat("node/node_modules/pg"); err != nil {
		t.Fatalf("examples/node/node_modules/pg is missing: run scripts/ensure-examples (make test does)")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import psycopg2").Run(); err != nil {
		t.Fatalf("psycopg2 is missing for /usr/bin/python3: run scripts/ensure-examples (make test does): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	servers := pgtest.Servers(t, 2)
	dir := t.TempDir()
	file := filepath.Join(dir, "shardid.yaml")
	require.NoError(t, os.WriteFile(file, fmt.Appendf(nil, "cluster: lang\nshards: 8\ncatalog: %s\nhosts:\n  - name: pg1\n    dsn: %s\n  - name: pg2\n    dsn: %s\n",
		pgtest.NewDB(t, servers[0]), pgtest.NewDB(t, servers[0]), pgtest.NewDB(t, servers[1])), 0o644))
	cfg, err := shardmgr.LoadConfig(file)
	require.NoError(t, err)
	c, err := cluster.Open(ctx, cfg)
	require.NoError(t, err)
	defer c.Close()
	_, err = install.Init(ctx, c, install.InitOptions{})
	require.NoError(t, err)
	set, err := migrate.LoadMigrationDir("shard-migrations")
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, c, set, migrate.Options{})
	require.NoError(t, err)

	// The catalog as docs/routing.md's reading role.
	admin, err := pgxpool.New(ctx, cfg.Catalog)
	require.NoError(t, err)
	defer admin.Close()
	role := fmt.Sprintf("routes_reader_%d", time.Now().UnixNano())
	u, err := url.Parse(cfg.Catalog)
	require.NoError(t, err)
	db := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	q := pgx.Identifier{role}.Sanitize()
	_, err = admin.Exec(ctx, `CREATE ROLE `+q+` LOGIN; REVOKE CONNECT ON DATABASE `+db+` FROM PUBLIC;
		GRANT CONNECT ON DATABASE `+db+` TO `+q+`; GRANT SELECT ON shardid.routes, shardid.catalog_readers TO `+q)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Exec(context.Background(), `DROP OWNED BY `+q+`; DROP ROLE `+q) })
	u.User = url.User(role)
	env := append(os.Environ(), "SHARDID_CATALOG="+u.String())

	run := func(lang, key string, post int) like {
		t.Helper()
		r := exampleRunners[lang]
		cmd := exec.CommandContext(ctx, r[0], r[1], key, "7", fmt.Sprint(post))
		cmd.Env = env
		out, err := cmd.Output()
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		require.NoError(t, err, "%s %q: %s", lang, key, stderr)
		var l like
		require.NoError(t, json.Unmarshal(out, &l), "%s printed %q", lang, out)
		return l
	}
	hostPool := func(name string) *pgxpool.Pool {
		h, ok := cfg.Host(name)
		require.True(t, ok)
		p, err := pgxpool.New(ctx, h.DSN)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		return p
	}
	check := func(lang, key string, l like, m *shardmgr.ShardMap) {
		t.Helper()
		want := int(shardmgr.KeyHash([]byte(key)) % uint64(len(m.Shards)))
		require.Equal(t, want, l.Shard, "%s: %q hashes to the Go router's shard", lang, key)
		require.Equal(t, m.Shards[want].Host, l.Host, "%s: %q", lang, key)
		require.Equal(t, m.Shards[want].Schema, l.Schema)
		id, err := strconv.ParseInt(l.ID, 10, 64)
		require.NoError(t, err)
		p, err := m.Layout.Decompose(idgen.ID(id))
		require.NoError(t, err)
		require.EqualValues(t, want, p.Shard, "%s: the id carries its shard", lang)
		require.Equal(t, want, l.IDShrd, "%s decodes the id's shard", lang)
		require.Equal(t, p.Time.UnixMilli(), l.MS, "%s decodes the id's time", lang)
		var n int
		require.NoError(t, hostPool(l.Host).QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{l.Schema, "likes"}.Sanitize()+` WHERE id = $1`, id).Scan(&n))
		require.Equal(t, 1, n, "%s: the row is where the routes said", lang)
	}

	m, err := c.Map(ctx, shardmgr.UseRead)
	require.NoError(t, err)
	keys := []string{"", "a", "alice@example.com", "tenant-42", "ü ñ 字"}
	for lang := range exampleRunners {
		for i, k := range keys {
			check(lang, k, run(lang, k, i), m)
		}
	}

	// The shard of "alice@example.com" moves to the other host: both
	// examples follow it, through the view alone.
	key := "alice@example.com"
	s := m.Shards[int(shardmgr.KeyHash([]byte(key))%uint64(len(m.Shards)))]
	to := "pg1"
	if s.Host == "pg1" {
		to = "pg2"
	}
	_, err = rebalance.MoveShard(ctx, c, s.ID, to, rebalance.MoveOptions{Migrations: set, Mode: rebalance.MoveAuto})
	require.NoError(t, err)
	m2, err := c.Map(ctx, shardmgr.UseRead)
	require.NoError(t, err)
	require.Equal(t, to, m2.Shards[s.ID].Host)
	for lang := range exampleRunners {
		l := run(lang, key, 99)
		require.Equal(t, to, l.Host, "%s follows the move", lang)
		check(lang, key, l, m2)
	}
}

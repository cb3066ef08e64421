package clustertest

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	shsql "github.com/shardid/shardid/sql"
)

// DBCounter numbers the databases of test clusters.
var DBCounter atomic.Int64

// Testdata is the repository's testdata directory, whatever package's
// tests ask.
func Testdata(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", "..", "..", "..", "testdata"}, elem...)...)
}

// SampleMigrations is the directory of the sample shard migrations.
var SampleMigrations = Testdata("migrations")

// Cluster returns a cluster file for shards logical shards on the
// three shared servers, with databases of this test's own: created here
// when create is true, else left for Init to create. They are dropped when
// the test ends.
func Cluster(t testing.TB, shards int, create bool) *shardmgr.Config {
	t.Helper()
	servers := pgtest.Servers(t, 3)
	n := DBCounter.Add(1)
	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("c%d", n), Shards: shards, Path: "test.yaml"}
	name := func(what string) string { return fmt.Sprintf("sm%d_%s", n, what) }
	cfg.Catalog = servers[0].DSN(name("catalog"))
	DropLater(t, servers[0], name("catalog"))
	for i, s := range servers {
		db := name(fmt.Sprintf("app%d", i+1))
		cfg.Hosts = append(cfg.Hosts, shardmgr.Host{Name: fmt.Sprintf("pg%d", i+1), DSN: s.DSN(db)})
		DropLater(t, s, db)
	}
	if create {
		for i, s := range servers {
			_, err := s.CreateDatabase(context.Background(), name(fmt.Sprintf("app%d", i+1)))
			require.NoError(t, err)
		}
		_, err := servers[0].CreateDatabase(context.Background(), name("catalog"))
		require.NoError(t, err)
	}
	require.NoError(t, cfg.ValidateCluster())
	return cfg
}

// DropLater drops database db on s when the test ends.
func DropLater(t testing.TB, s *localpg.Server, db string) {
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
	})
}

// Ctx is a context for one test, cancelled when it ends.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return c
}

// Pool opens a pool on dsn, closed when the test ends.
func Pool(t testing.TB, dsn string) *pgxpool.Pool { return pgtest.Pool(t, dsn) }

// HostPool opens a pool on the host named name of cfg.
func HostPool(t testing.TB, cfg *shardmgr.Config, name string) *pgxpool.Pool {
	h, ok := cfg.Host(name)
	require.True(t, ok, name)
	return Pool(t, h.DSN)
}

// ClusterMap reads the map from cfg's catalog.
func ClusterMap(t testing.TB, cfg *shardmgr.Config) *shardmgr.ShardMap {
	t.Helper()
	m, err := shardmgr.ReadMap(Ctx(t), Pool(t, cfg.Catalog))
	require.NoError(t, err)
	return m
}

// TableExists reports whether the table name exists on p.
func TableExists(t testing.TB, p *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, p.QueryRow(Ctx(t), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok))
	return ok
}

// FutureID is an id of shard ahead of now by ahead, with sequence seq.
func FutureID(shard int, ahead time.Duration, seq int64) int64 {
	ms := time.Now().Add(ahead).UnixMilli() - shsql.DefaultEpoch
	return ms<<(shsql.DefaultShardBits+shsql.DefaultSeqBits) | int64(shard)<<shsql.DefaultSeqBits | seq
}

// MapFS is files given as name -> body.
func MapFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys
}

// RouteLikes inserts n rows into shard's likes table through r.
func RouteLikes(t testing.TB, r *shardmgr.Router, shard, n int) {
	t.Helper()
	err := r.Tx(Ctx(t), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) SELECT g, g %% 100 FROM generate_series(1, $1) g`, s.Table("likes")), n)
		return err
	})
	require.NoError(t, err)
}

// OpenRouter opens a router on cfg, closed when the test ends.
func OpenRouter(t testing.TB, cfg *shardmgr.Config, opts ...shardmgr.RouterOption) *shardmgr.Router {
	t.Helper()
	r, err := shardmgr.Open(Ctx(t), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r
}

// LikeIDs reads shard's like ids from the host the catalog places it on.
func LikeIDs(t testing.TB, cfg *shardmgr.Config, shard int) []int64 {
	t.Helper()
	m := ClusterMap(t, cfg)
	p := HostPool(t, cfg, m.Shards[shard].Host)
	rows, err := p.Query(Ctx(t), fmt.Sprintf(`SELECT id FROM %s ORDER BY id`, pgx.Identifier{m.Shards[shard].Schema, "likes"}.Sanitize()))
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

// Handle is the operator's handle on cfg for this test, as a command
// opens one: opened on first use, closed when the test ends, and opened
// anew once the test changes cfg (a host added to the file, say), so that
// every call sees the file as it is now.
func Handle(t testing.TB, cfg *shardmgr.Config) *cluster.Cluster {
	t.Helper()
	key := handleKey{t, cfg}
	now := fmt.Sprintf("%+v", *cfg)
	handlesMu.Lock()
	defer handlesMu.Unlock()
	if h, ok := handles[key]; ok {
		if h.seen == now {
			return h.c
		}
		h.c.Close()
	} else {
		t.Cleanup(func() {
			handlesMu.Lock()
			h := handles[key]
			delete(handles, key)
			handlesMu.Unlock()
			h.c.Close()
		})
	}
	c, err := cluster.Open(Ctx(t), cfg)
	require.NoError(t, err)
	handles[key] = openHandle{c, now}
	return c
}

// Reopen closes this test's handle on cfg, if any, so that the next
// Handle opens a new one: after a server restart, whose sessions the old
// handle's pools still hold (as a new command would).
func Reopen(t testing.TB, cfg *shardmgr.Config) {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	key := handleKey{t, cfg}
	if h, ok := handles[key]; ok {
		h.c.Close()
		handles[key] = openHandle{h.c, ""} // the cleanup closes it again: a no-op
	}
}

type handleKey struct {
	t   testing.TB
	cfg *shardmgr.Config
}

type openHandle struct {
	c    *cluster.Cluster
	seen string // cfg as it was when c was opened
}

var (
	handlesMu sync.Mutex
	handles   = map[handleKey]openHandle{}
)

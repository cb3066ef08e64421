package shardmgr

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var dbCounter atomic.Int64

// testCluster returns a cluster file for shards logical shards on the
// three shared servers, with databases of this test's own: created here
// when create is true, else left for Init to create. They are dropped when
// the test ends.
func testCluster(t testing.TB, shards int, create bool) *Config {
	t.Helper()
	servers := pgtest.Servers(t, 3)
	n := dbCounter.Add(1)
	cfg := &Config{Cluster: fmt.Sprintf("c%d", n), Shards: shards, Path: "test.yaml"}
	name := func(what string) string { return fmt.Sprintf("sm%d_%s", n, what) }
	cfg.Catalog = servers[0].DSN(name("catalog"))
	dropLater(t, servers[0], name("catalog"))
	for i, s := range servers {
		db := name(fmt.Sprintf("app%d", i+1))
		cfg.Hosts = append(cfg.Hosts, Host{Name: fmt.Sprintf("pg%d", i+1), DSN: s.DSN(db)})
		dropLater(t, s, db)
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

func dropLater(t testing.TB, s *localpg.Server, db string) {
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

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

func pool(t testing.TB, dsn string) *pgxpool.Pool { return pgtest.Pool(t, dsn) }

func hostPool(t testing.TB, cfg *Config, name string) *pgxpool.Pool {
	h, ok := cfg.Host(name)
	require.True(t, ok, name)
	return pool(t, h.DSN)
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/shardid/shardid/shardmgr/cluster"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The README's example runs as written against a cluster set up the way
// the README says: a cluster file, init, the likes migration.
func TestRouterExampleRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	servers := pgtest.Servers(t, 2)
	file := fmt.Sprintf("cluster: example\nshards: 16\ncatalog: %s\nhosts:\n  - name: pg1\n    dsn: %s\n  - name: pg2\n    dsn: %s\n",
		pgtest.NewDB(t, servers[0]), pgtest.NewDB(t, servers[0]), pgtest.NewDB(t, servers[1]))
	migrations, err := filepath.Abs("../../testdata/migrations")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(dir+"/shardid.yaml", []byte(file), 0o644))
	t.Chdir(dir)

	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	require.NoError(t, err)
	c, err := cluster.Open(ctx, cfg)
	require.NoError(t, err)
	defer c.Close()
	_, err = install.Init(ctx, c, install.InitOptions{})
	require.NoError(t, err)
	set, err := migrate.LoadMigrationDir(migrations)
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, c, set, migrate.Options{})
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, 31337, 42))
	require.NoError(t, run(ctx, &out, 7, 42))
	// 31337 mod 16 = 9 and 7 are both in pg2's half (shards 8-15).
	require.Regexp(t, regexp.MustCompile(`^like \d+ of post 42 lives in shard_0009 on pg2
post 42 has 1 likes on 16 shards
like \d+ of post 42 lives in shard_0007 on pg1
post 42 has 2 likes on 16 shards
$`), out.String())
}

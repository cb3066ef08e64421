package hosts_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fileComment is a line of the cluster file that every edit must keep.
const fileComment = "# written by hand: this comment stays"

// writeFile writes cfg as a cluster file, with comments, and returns its
// path.
func writeFile(t *testing.T, cfg *shardmgr.Config) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s\ncluster: %s\nshards: %d\ncatalog: %s\nhosts:\n", fileComment, cfg.Cluster, cfg.Shards, cfg.Catalog)
	for _, h := range cfg.Hosts {
		fmt.Fprintf(&b, "  - name: %s   # host %s\n    dsn: '%s'\n", h.Name, h.Name, h.DSN)
		if h.Drain {
			b.WriteString("    drain: true\n")
		}
	}
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o640))
	return path
}

// initFile initialises cfg's cluster from a cluster file on disk and
// returns the file as loaded.
func initFile(t *testing.T, cfg *shardmgr.Config) *shardmgr.Config {
	t.Helper()
	loaded, err := shardmgr.LoadConfig(writeFile(t, cfg))
	require.NoError(t, err)
	// A handle of its own, closed at once: its connections would count
	// among the backends a test watches.
	c, err := cluster.Open(clustertest.Ctx(t), loaded)
	require.NoError(t, err)
	defer c.Close()
	_, err = install.Init(clustertest.Ctx(t), c, install.InitOptions{})
	require.NoError(t, err)
	return loaded
}

// open opens a handle on cfg, closed when the test ends.
func open(t *testing.T, cfg *shardmgr.Config) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Open(clustertest.Ctx(t), cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// reload reads the cluster file at path again.
func reload(t *testing.T, path string) *shardmgr.Config {
	t.Helper()
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	return cfg
}

// fileAgrees asserts that the cluster file at path and the catalog agree
// on every host (a move would refuse otherwise).
func fileAgrees(t *testing.T, path string) *shardmgr.ShardMap {
	t.Helper()
	cfg := reload(t, path)
	m := clustertest.ClusterMap(t, cfg)
	for _, h := range cfg.Hosts {
		ch, ok := m.Host(h.Name)
		require.True(t, ok, "host %s in the file, not in the catalog", h.Name)
		require.Equal(t, h.CatalogDSN(), ch.DSN, h.Name)
		require.Equal(t, h.Drain, ch.Drain, h.Name)
	}
	require.Len(t, m.Hosts, len(cfg.Hosts))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), fileComment)
	return m
}

// snapshot is what must not change when a command is refused: the file's
// bytes and the catalog's generation.
func snapshot(t *testing.T, cfg *shardmgr.Config) string {
	t.Helper()
	data, err := os.ReadFile(cfg.Path)
	require.NoError(t, err)
	return fmt.Sprintf("%s\ngeneration %d", data, clustertest.ClusterMap(t, cfg).Generation)
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// tagHost gives host name's DSN an application_name of its own, so that
// its connections can be counted (backends).
func tagHost(cfg *shardmgr.Config, name string) string {
	app := fmt.Sprintf("%s_%s", cfg.Cluster, name)
	for i := range cfg.Hosts {
		if cfg.Hosts[i].Name == name {
			cfg.Hosts[i].DSN += "&application_name=" + app
		}
	}
	return app
}

// requireBackends waits (a bound on a hang) until a session named app is
// on the server of dsn.
func requireBackends(t *testing.T, dsn, app, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return backends(t, dsn, app) > 0 }, 2*time.Minute, 100*time.Millisecond, what)
}

// backends counts the sessions named app on the server of dsn (asked
// through its postgres database, under another name).
func backends(t *testing.T, dsn, app string) int {
	pc, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	admin := fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", pc.Host, pc.Port)
	var n int
	err = clustertest.Pool(t, admin).QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
	require.NoError(t, err)
	return n
}

// requireNoBackends waits (a bound on a hang) until no session named app
// is left on the server of dsn: the pools that held them are closed.
func requireNoBackends(t *testing.T, dsn, app, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return backends(t, dsn, app) == 0 }, 2*time.Minute, 100*time.Millisecond, what)
}

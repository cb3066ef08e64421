package install

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// One database under two names passes the cluster file's checks (the
// DSNs differ) but not init's: it asks the servers, refuses with one
// message naming both hosts, and records nothing, so the corrected file
// initialises the same catalog.
func TestInitRefusesOneDatabaseUnderTwoNames(t *testing.T) {
	t.Parallel()
	// A server of this test's own that also listens on a unix socket, in
	// a directory the server's user (postgres, when we are root) may write.
	sock, err := os.MkdirTemp("", "shardid-sock-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sock) })
	require.NoError(t, os.Chmod(sock, 0o777))
	own := pgtest.Own(t, localpg.Options{Settings: map[string]string{"unix_socket_directories": "'" + sock + "'"}})
	for _, tc := range []struct {
		name  string
		other func(db string) string
	}{
		{"localhost", func(db string) string {
			return fmt.Sprintf("postgres://postgres@localhost:%d/%s?sslmode=disable", own.Port, db)
		}},
		{"IPv4-mapped IPv6", func(db string) string {
			return fmt.Sprintf("postgres://postgres@[::ffff:127.0.0.1]:%d/%s?sslmode=disable", own.Port, db)
		}},
		{"unix socket", func(db string) string {
			return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d", db, sock, own.Port)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := clustertest.Cluster(t, 6, false)
			db := fmt.Sprintf("twonames_%d", clustertest.DBCounter.Add(1))
			clustertest.DropLater(t, own, db)
			cfg.Hosts[0].DSN = own.DSN(db)
			cfg.Hosts[1].DSN = tc.other(db)
			require.NoError(t, cfg.ValidateCluster(), "the file alone cannot tell")

			_, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
			require.ErrorIs(t, err, shardmgr.ErrConfig)
			msg := err.Error()
			require.Contains(t, msg, "hosts pg1 (")
			require.Contains(t, msg, ") and pg2 (")
			require.Contains(t, msg, "are one database")
			require.NotContains(t, msg, "pg3")
			require.Equal(t, 1, strings.Count(msg, "are one database"))

			// Nothing recorded: no catalog tables, no host record.
			require.False(t, clustertest.TableExists(t, clustertest.Pool(t, cfg.Catalog), "shardid.cluster"))
			require.False(t, clustertest.TableExists(t, clustertest.Pool(t, cfg.Hosts[0].DSN), "shardid.host_info"))

			// The corrected file initialises.
			cfg.Hosts = append(cfg.Hosts[:1], cfg.Hosts[2:]...)
			res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
			require.NoError(t, err)
			require.True(t, res.CatalogCreated)
			requireVerifyOK(t, cfg)
		})
	}
}

// Databases of two servers cloned from one data directory (the same
// system identifier, and here the same database oids) are different
// databases: init accepts them.
func TestInitAcceptsClonedServers(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 6, false)
	ids := map[int64]bool{}
	for _, s := range pgtest.Servers(t, 3) {
		var id int64
		require.NoError(t, clustertest.Pool(t, s.DSN("postgres")).QueryRow(clustertest.Ctx(t), `SELECT system_identifier FROM pg_control_system()`).Scan(&id))
		ids[id] = true
	}
	require.Len(t, ids, 1, "localpg's servers are copies of one initdb")
	_, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
}

// A host database that belongs to another cluster is refused before
// anything is created, the catalog's database included.
func TestInitChecksHostRecordsFirst(t *testing.T) {
	t.Parallel()
	other := initCluster(t, 3)
	cfg := clustertest.Cluster(t, 6, false)
	cfg.Hosts[2].DSN = other.Hosts[0].DSN
	_, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.ErrorIs(t, err, shardmgr.ErrClusterMismatch)
	require.ErrorContains(t, err, fmt.Sprintf("host pg3: its database belongs to cluster %q as host \"pg1\"", other.Cluster))
	pc, err := pgconn.ParseConfig(cfg.Catalog)
	require.NoError(t, err)
	require.False(t, databaseExists(t, pgtest.Servers(t, 3)[0].DSN("postgres"), pc.Database), "init created the catalog database")
}

// Several first-time inits at once: every database and the catalog are
// created once, and every run succeeds (the losers of CREATE DATABASE
// find the database there, not a duplicate-key error).
func TestConcurrentFirstInits(t *testing.T) {
	t.Parallel()
	for range 3 {
		cfg := clustertest.Cluster(t, 6, false)
		const n = 4
		errs := make([]error, n)
		created := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := Init(context.Background(), clustertest.Handle(t, cfg), InitOptions{})
				errs[i] = err
				if res != nil {
					created[i] = res.CatalogCreated
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		var firsts int
		for _, c := range created {
			if c {
				firsts++
			}
		}
		require.Equal(t, 1, firsts)
		requireVerifyOK(t, cfg)
	}
}

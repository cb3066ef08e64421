package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

// serve with its segment source and its lease database behind PgBouncer
// in transaction mode (a pool of one server connection, so that the
// clients' transactions share it): it does not migrate through the pooler
// and says to give the migration a direct DSN; once the databases are
// migrated directly it draws ids through the pooler, all distinct, with
// no error. Failed before: "unsupported startup parameter: lock_timeout"
// and never ready (issue 28).
func TestServeThroughPgBouncerInTransactionMode(t *testing.T) {
	serveThroughPgBouncer(t, localpg.BouncerOptions{PoolMode: localpg.PoolTransaction, PoolSize: 1})
}

// The same through PgBouncer in session mode (each client connection
// holds a server connection of its own until it leaves; a pool of 20,
// more than serve opens): serve tells the pooler too, does not migrate
// through it, and draws ids with no error.
func TestServeThroughPgBouncerInSessionMode(t *testing.T) {
	serveThroughPgBouncer(t, localpg.BouncerOptions{PoolMode: localpg.PoolSession, PoolSize: 20})
}

func serveThroughPgBouncer(t *testing.T, opts localpg.BouncerOptions) {
	bin := buildShardid(t)
	srv := pgtest.Servers(t, 1)[0]
	seg, leases := pgtest.NewDB(t, srv), pgtest.NewDB(t, srv)
	b := pgtest.Bouncer(t, srv, opts)
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`segments:
  sources:
    - '%s'
  tags:
    order: {min_step: 500, max_step: 500}
snowflake:
  leases: '%s'
  datacenter: 1
  epoch_ms: 1288834974657
`, b.Via(seg), b.Via(leases))), 0o600))

	p := launchServe(t, bin, "--config", config)
	require.Eventually(t, func() bool {
		log := p.log.String()
		return strings.Contains(log, "connection pooler") && strings.Contains(log, "direct DSN") &&
			strings.Contains(log, "shardid.segment_migrations is at version 0") && strings.Contains(log, "shardid.snowflake_migrations is at version 0")
	}, 2*time.Minute, 50*time.Millisecond, "serve does not say to migrate through a direct DSN: %s", p.log)
	code, body := p.get("/healthz")
	require.Equal(t, 503, code, body)
	require.NotContains(t, p.log.String(), "unsupported startup parameter")

	// Migrated directly, the sources are taken up by the running serve.
	ctx := context.Background()
	require.NoError(t, migrations.Up(ctx, seg, migrations.Segment))
	require.NoError(t, migrations.Up(ctx, leases, migrations.Snowflake))
	require.Eventually(t, func() bool { code, _ := p.get("/healthz"); return code == 200 },
		2*time.Minute, 100*time.Millisecond, "serve does not become ready: %s", p.log)

	const clients, rounds = 8, 40
	var mu sync.Mutex
	seen := map[string]bool{}
	var errs []string
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				path := "/v1/ids/order?count=97"
				if (c+r)%2 == 1 {
					path = "/v1/snowflake?count=97"
				}
				code, body := p.get(path)
				var got struct {
					IDs []string `json:"ids"`
				}
				mu.Lock()
				if code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || len(got.IDs) != 97 {
					errs = append(errs, fmt.Sprintf("%s: %d %s", path, code, body))
				}
				for _, id := range got.IDs {
					if seen[path[:7]+id] {
						errs = append(errs, path+": repeated id "+id)
					}
					seen[path[:7]+id] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs, "log: %s", p.log)
	require.Len(t, seen, clients*rounds*97)
	require.NotContains(t, p.log.String(), "prepared statement")
	t.Logf("%d ids drawn through PgBouncer (%s mode, pool size %d), 0 errors", len(seen), opts.PoolMode, opts.PoolSize)
	p.sigterm(t)
}

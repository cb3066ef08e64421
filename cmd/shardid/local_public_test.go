package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/app/localcluster"
	"github.com/shardid/shardid/internal/app/serveconfig"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/logbuf"
	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/shardmgr"
	shsql "github.com/shardid/shardid/sql"
)

// `local up` closes the databases its cluster file names to PUBLIC, so
// that init on the local cluster does not warn about PUBLIC CONNECT (it
// did on every run) and serve's segment sources log no warning (they
// logged three, one per source, none named). (Failed before: init's
// warning on stderr, PUBLIC could connect to shardid_catalog and seg.)
func TestLocalUpClosesItsDatabasesToPublic(t *testing.T) {
	base := pgtest.ReachableTempDir(t)
	dir, config := filepath.Join(base, ".shardid"), filepath.Join(base, "shardid.yaml")
	flags := []string{"--dir", dir, "--write-config", config}
	t.Cleanup(func() { localcluster.Down(context.Background(), localcluster.Options{Dir: dir}, true) })

	out, code := runClusterCmd(t, append([]string{"local", "up", "--hosts", "2", "--shard-count", "4", "--json"}, flags...)...)
	require.Equal(t, 0, code, out)
	var res localcluster.UpResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	cfg, err := shardmgr.LoadConfig(config)
	require.NoError(t, err)
	fallback := generatorFallbackWarnings(t, cfg)
	require.ElementsMatch(t, fallback, res.Init.Warnings)
	require.ElementsMatch(t, []string{"pg1/shardid_catalog (created, CONNECT revoked)",
		"pg1/seg (created, CONNECT revoked)", "pg2/seg (created, CONNECT revoked)"}, res.Databases)

	sec, err := serveconfig.Load(config, os.LookupEnv)
	require.NoError(t, err)
	ctx := context.Background()
	for _, dsn := range append([]string{cfg.Catalog}, sec.Segments.Sources...) {
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		open, err := pgdatabase.PublicCanConnect(ctx, conn, conn.Config().Database)
		conn.Close(ctx)
		require.NoError(t, err)
		require.False(t, open, "PUBLIC may connect to %s", dsn)
	}

	// init on the local cluster: nothing to warn about.
	stdout, stderr, code := runClusterCmdStderr(t, "init", "--config", config)
	require.Equal(t, 0, code, stdout+stderr)
	for _, w := range fallback {
		require.Contains(t, stderr, "warning: "+w+"\n")
		stderr = strings.Replace(stderr, "warning: "+w+"\n", "", 1)
	}
	require.NotContains(t, stderr, "PUBLIC")
	require.NotContains(t, stderr, "warning")

	// serve's segment sources: no warning either.
	var log logbuf.Buffer
	_, closeAll, err := httpapi.OpenAllocator(ctx, sec.Segments, slog.New(slog.NewTextHandler(&log, nil)))
	require.NoError(t, err)
	defer closeAll()
	require.Eventually(t, func() bool { return strings.Count(log.String(), "segment source ready") == len(sec.Segments.Sources) },
		3*time.Minute, 20*time.Millisecond, "every source prepared: %s", log.String())
	require.NotContains(t, log.String(), "PUBLIC")

	// A second up changes nothing.
	out, code = runClusterCmd(t, append([]string{"local", "up"}, flags...)...)
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, "PUBLIC may not connect")
}

// generatorFallbackWarnings is what init rightly warns on a major the C
// generator is not built for (scripts/test-versions: no server headers of
// that major here): generator auto installs PL/pgSQL, one line a host
// (TestInitChecksTheCGeneratorFirst). On Debian's 15, where the extension
// is installed, nothing.
func generatorFallbackWarnings(t *testing.T, cfg *shardmgr.Config) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []string
	for _, h := range cfg.Hosts {
		conn, err := pgx.Connect(ctx, h.DSN)
		require.NoError(t, err)
		var available bool
		var version string
		err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_available_extension_versions WHERE name = 'shardid' AND version = $1),
			current_setting('server_version')`, shsql.ExtensionVersion).Scan(&available, &version)
		conn.Close(ctx)
		require.NoError(t, err)
		if !available {
			out = append(out, "host "+h.Name+": generator auto installs the PL/pgSQL generator: its server (PostgreSQL "+version+") does not offer the shardid extension "+shsql.ExtensionVersion)
		}
	}
	return out
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/jsonshape"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
)

// update rewrites testdata/golden from this run:
//
//	go test ./cmd/shardid -run TestGolden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenDir holds one file per output held stable (docs/compatibility.md).
var goldenDir = filepath.Join("..", "..", "testdata", "golden")

// jsonShape is the shape of a JSON document (package jsonshape, which
// the console's tests compare with the same golden files).
func jsonShape(t *testing.T, data []byte) string {
	t.Helper()
	shape, err := jsonshape.Of(data)
	require.NoError(t, err, "not one JSON value: %s", data)
	return shape
}

// checkGolden compares got with testdata/golden/name, or writes it there
// with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		require.NoError(t, os.MkdirAll(goldenDir, 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run go test ./cmd/shardid -run TestGolden -update")
	require.Equal(t, string(want), got, "%s changed: if on purpose, record it in CHANGELOG.md (docs/compatibility.md) and run go test ./cmd/shardid -run TestGolden -update", name)
}

// goldenCmd runs shardid with args, expecting exit code code, and returns
// its stdout.
func goldenCmd(t *testing.T, code int, args ...string) []byte {
	t.Helper()
	out, err := runCmd(t, args...)
	require.Equal(t, code, exitCode(err), "%v: %s %v", args, out, err)
	return []byte(out)
}

// The --json output of every command a script reads, by shape.
func TestGoldenJSON(t *testing.T) {
	t.Parallel()
	t.Run("offline", func(t *testing.T) {
		checkGolden(t, "version.json.shape", jsonShape(t, goldenCmd(t, 0, "version", "--json")))
		checkGolden(t, "id-decode.json.shape", jsonShape(t, goldenCmd(t, 0, "id", "decode", "--json", "4041150592192615424")))
		checkGolden(t, "id-decode-snowflake.json.shape", jsonShape(t, goldenCmd(t, 0, "id", "decode", "--json", "--layout", "snowflake", "175928847299117063")))
		// encode prints the id alone, the same every run.
		checkGolden(t, "id-encode.txt", string(goldenCmd(t, 0, "id", "encode", "--time", "2026-11-29T14:31:52.784Z", "--shard", "5", "--seq", "3")))
	})

	t.Run("cluster", func(t *testing.T) {
		path, _ := clusterFile(t, 6)
		dir := filepath.Join("..", "..", "testdata", "migrations")
		checkGolden(t, "init.json.shape", jsonShape(t, goldenCmd(t, 0, "init", "--config", path, "--json")))
		checkGolden(t, "migrate-up.json.shape", jsonShape(t, goldenCmd(t, 0, "migrate", "up", "--config", path, "--dir", dir, "--json")))
		checkGolden(t, "migrate-status.json.shape", jsonShape(t, goldenCmd(t, 0, "migrate", "status", "--config", path, "--dir", dir, "--json")))
		checkGolden(t, "migrate-generator.json.shape", jsonShape(t, goldenCmd(t, 0, "migrate", "generator", "--config", path, "--json")))
		checkGolden(t, "status.json.shape", jsonShape(t, goldenCmd(t, 0, "status", "--config", path, "--json")))
		checkGolden(t, "shard-where.json.shape", jsonShape(t, goldenCmd(t, 0, "shard", "where", "5", "--config", path, "--json")))
		checkGolden(t, "shard-move-dry-run.json.shape", jsonShape(t, goldenCmd(t, 0, "shard", "move", "5", "--to", "pg1", "--dry-run", "--dir", dir, "--config", path, "--json")))
		checkGolden(t, "verify.json.shape", jsonShape(t, goldenCmd(t, 0, "verify", "--config", path, "--json")))

		cfg, err := shardmgr.LoadConfig(path)
		require.NoError(t, err)
		r, err := shardmgr.Open(context.Background(), cfg)
		require.NoError(t, err)
		for s := range 6 {
			routeLikes(t, r, s, 10)
		}
		r.Close()

		// A fourth host: a plan with a move, an apply that makes it.
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = fmt.Fprintf(f, "  - name: pg4\n    dsn: %s\n", pgtest.NewDB(t, pgtest.Servers(t, 4)[3]))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		checkGolden(t, "rebalance-plan.json.shape", jsonShape(t, goldenCmd(t, 0, "rebalance", "plan", "--config", path, "--json")))
		goldenCmd(t, 0, "init", "--config", path) // apply pg4 to the catalog: apply does not
		checkGolden(t, "rebalance-apply.json.shape", jsonShape(t, goldenCmd(t, 0, "rebalance", "apply", "--config", path, "--dir", dir, "--json")))
		checkGolden(t, "rebalance-status.json.shape", jsonShape(t, goldenCmd(t, 0, "rebalance", "status", "--config", path, "--all", "--json")))

		// A report with a problem in it.
		p := pgtest.Pool(t, cfg.Hosts[0].DSN)
		_, err = p.Exec(context.Background(), `DROP FUNCTION shard_0000.next_id() CASCADE`)
		require.NoError(t, err)
		checkGolden(t, "verify-problems.json.shape", jsonShape(t, goldenCmd(t, 1, "verify", "--config", path, "--json")))
	})
}

// routeLikes inserts rows rows into shard's likes table through r.
func routeLikes(t *testing.T, r *shardmgr.Router, shard, rows int) {
	t.Helper()
	require.NoError(t, r.Tx(context.Background(), shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) SELECT g, g FROM generate_series(1, $1) g`, s.Table("likes")), rows)
		return err
	}))
}

// initAndFill runs init and the sample migrations on the cluster of path,
// then inserts rows rows into every one of its shards through a router.
// It returns the migrations directory.
func initAndFill(t *testing.T, path string, shards, rows int) string {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "migrations")
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "migrate", "up", "--config", path, "--dir", dir)
	require.Equal(t, 0, code, out)
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	r, err := shardmgr.Open(context.Background(), cfg)
	require.NoError(t, err)
	defer r.Close()
	for s := range shards {
		routeLikes(t, r, s, rows)
	}
	return dir
}

// The HTTP API of shardid serve: each response's status, content type and
// body shape, errors included.
func TestGoldenHTTP(t *testing.T) {
	srv := pgtest.Servers(t, 1)[0]
	seg, leases := pgtest.NewDB(t, srv), pgtest.NewDB(t, srv)
	file := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(file, []byte("segments:\n  sources:\n    - '"+seg+"'\n  tags:\n    order: {}\nsnowflake:\n  leases: '"+leases+"'\n  datacenter: 7\n"), 0o600))
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	t.Cleanup(func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) })
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"serve", "--config", file, "--listen", addr})
		done <- root.ExecuteContext(ctx)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(2 * time.Minute):
			t.Error("serve did not stop within 2 minutes")
		}
	}()
	client := &http.Client{Timeout: 2 * time.Minute}
	get := func(path string) (*http.Response, []byte, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
		}
		resp, _, err := get("/healthz")
		return err == nil && resp.StatusCode == http.StatusOK
	}, 3*time.Minute, 20*time.Millisecond, "serve did not answer /healthz within 3 minutes")

	cases := []struct{ name, path string }{
		{"http-ids.shape", "/v1/ids/order?count=2"},
		{"http-ids-unknown-tag.shape", "/v1/ids/nope?count=2"},
		{"http-ids-bad-count.shape", "/v1/ids/order?count=x"},
		{"http-snowflake.shape", "/v1/snowflake?count=2"},
		{"http-snowflake-bad-count.shape", "/v1/snowflake?count=0"},
		{"http-healthz.shape", "/healthz"},
	}
	for _, c := range cases {
		resp, body, err := get(c.path)
		require.NoError(t, err, c.path)
		got := fmt.Sprintf("GET %s\nstatus: %d\ncontent-type: %s\n", c.path, resp.StatusCode, resp.Header.Get("Content-Type")) + jsonShape(t, body)
		checkGolden(t, c.name, got)
	}
	// /metrics: shardid's metric names and types, not their values (the
	// go_ and process_ metrics and the exposition format are the
	// Prometheus client's).
	resp, body, err := get("/metrics")
	require.NoError(t, err)
	var types []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "# TYPE shardid_") {
			types = append(types, strings.TrimPrefix(line, "# TYPE "))
		}
	}
	slices.Sort(types)
	checkGolden(t, "http-metrics.types", fmt.Sprintf("GET /metrics\nstatus: %d\n", resp.StatusCode)+strings.Join(types, ""))
}

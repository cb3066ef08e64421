package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// TestMain stops the local PostgreSQL servers the tests of this package
// start (serve needs real source databases).
func TestMain(m *testing.M) { runMainIfAsked(); pgtest.Main(m) }

func TestServe(t *testing.T) {
	srv := pgtest.Servers(t, 1)[0]
	a, b := pgtest.NewDB(t, srv), pgtest.NewDB(t, srv)
	t.Setenv("SEG_B", b)
	file := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`segments:
  sources:
    - `+a+`
    - ${SEG_B}
  tags:
    payment: {}
    order:
      min_step: 500
      max_step: 20000
      format: "ORD-{date}-{seq:10}"
`), 0o600))
	t.Setenv("SHARDID_CONFIG", file) // the default of --config
	// serve's garbage-collector policy applies when the environment sets
	// none; it is the process's, so give this one back its default after.
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	t.Cleanup(func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"serve", "--listen", addr})
		done <- root.ExecuteContext(ctx)
	}()

	var body struct {
		Tag string   `json:"tag"`
		IDs []string `json:"ids"`
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/v1/ids/order?count=5")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&body) == nil
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, "order", body.Tag)
	require.Len(t, body.IDs, 5)
	f, err := segment.CompileFormat("ORD-{date}-{seq:10}")
	require.NoError(t, err)
	for _, id := range body.IDs {
		_, err := f.Parse(id)
		require.NoError(t, err, id)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	hb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "ready once the first request is served: %s", hb)
	require.EqualValues(t, httpapi.DefaultHeapLimit, debug.SetMemoryLimit(-1), "collects at --heap-mib")
	require.Equal(t, -1, debug.SetGCPercent(-1), "not each time the heap doubles")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a signal stops serve cleanly")
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeBadConfig(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ text, msg string }{
		"no section":  {"cluster: x\n", "no segments: section"},
		"unknown key": {"segments:\n  sources: [postgres://h/seg]\n  tags:\n    order: {min_stp: 5}\n", "min_stp"},
		"invalid":     {"segments:\n  sources: []\n  tags:\n    order: {}\n", "at least one database"},
		"missing env": {"segments:\n  sources: [\"postgres://u:${NO_SUCH_VAR_X}@h/seg\"]\n  tags:\n    order: {}\n", "NO_SUCH_VAR_X"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		require.NoError(t, os.WriteFile(file, []byte(tc.text), 0o600))
		_, err := runShardid(t, "serve", "--config", file, "--listen", "127.0.0.1:0")
		require.ErrorContains(t, err, tc.msg, name)
		require.Equal(t, 1, exitCode(err), name)
	}
	_, err := runShardid(t, "serve", "--heap-mib", "-1")
	require.ErrorContains(t, err, "--heap-mib must not be negative")
	require.Equal(t, 2, exitCode(err))
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
)

// TestHostDrainWithoutConnectionSlots (issue 28 §2): a drain that cannot
// get the connections it needs is refused before it marks the host, in
// one line naming what was full; a drain that fails after the host is
// marked (here: marked by an earlier run) says the host is marked and
// what moves the rest, and never prints "balanced: nothing to move" on
// its way to failing. Before, with one slot free on the catalog's server
// (enough for the plan, not for the apply, which holds its lock session
// beside its catalog queries), the drain marked the host, then failed
// with 53300.
func TestHostDrainWithoutConnectionSlots(t *testing.T) {
	shared := pgtest.Servers(t, 2)
	few := localpg.Options{Settings: map[string]string{"max_connections": "25"}}
	catSrv, pg3Srv := pgtest.Own(t, few), pgtest.Own(t, few)
	catalogDSN := pgtest.NewDB(t, catSrv)
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: cli\nshards: 6\ncatalog: %s\nhosts:\n", catalogDSN)
	for i, s := range []*localpg.Server{shared[0], shared[1], pg3Srv} {
		fmt.Fprintf(&b, "  - name: pg%d\n    dsn: %s\n", i+1, pgtest.NewDB(t, s))
	}
	path := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	dir := initAndFill(t, path, 6, 10)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	drain := []string{"host", "drain", "pg3", "--mode", "offline", "--dir", dir, "--config", path}

	refused := func(what string, marked bool) (stdout, stderr string) {
		t.Helper()
		stdout, stderr, code := runClusterCmdStderr(t, drain...)
		require.Equal(t, 1, code, "%s: %s %s", what, stdout, stderr)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%s: one line: %s", what, stderr)
		require.Contains(t, stderr, "too many clients", what)
		require.Contains(t, stderr, "no connection slot free", what)
		require.NotContains(t, stdout, "nothing to move", what)
		if !marked {
			require.NotContains(t, stdout+stderr, "marked drain", what)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, string(before), string(after), "%s: the cluster file is not marked", what)
		}
		return stdout, stderr
	}

	// pg3's server has no slot left: refused, naming the host.
	release := holdSlots(t, pg3Srv, 0)
	_, stderr := refused("pg3 full", false)
	require.Contains(t, stderr, "pg3")
	release()
	requireDrainMark(t, catalogDSN, false)

	// The catalog's server has one slot: the plan gets it, the apply
	// cannot hold its lock session and query the catalog.
	release = holdSlots(t, catSrv, 1)
	_, stderr = refused("catalog with one slot", false)
	require.Contains(t, stderr, "catalog")
	release()
	requireDrainMark(t, catalogDSN, false)

	// With the slots back, the drain runs: marked, pg3 emptied.
	out := string(goldenCmd(t, 0, drain...))
	require.Contains(t, out, "host pg3 marked drain")
	requireDrainMark(t, catalogDSN, true)
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	r, err := shardmgr.Open(context.Background(), cfg)
	require.NoError(t, err)
	require.Empty(t, r.Map().ShardsOn("pg3"))
	r.Close() // its catalog session would take a slot below

	// Marked by the run before, and failing now: the output says the
	// host is marked and what moves what is left.
	release = holdSlots(t, catSrv, 1)
	_, stderr = refused("marked, catalog with one slot", true)
	require.Contains(t, stderr, "host pg3 is marked drain")
	require.Contains(t, stderr, "shardid rebalance apply")
	release()
}

// requireDrainMark checks host pg3's drain mark in the catalog.
func requireDrainMark(t *testing.T, catalogDSN string, want bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, catalogDSN)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var drain bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT drain FROM shardid.hosts WHERE name = 'pg3'`).Scan(&drain))
	require.Equal(t, want, drain, "pg3's drain mark in the catalog")
}

// holdSlots takes every connection slot of srv (as a superuser, the
// reserved ones too) but free, and returns what gives them back. It waits
// until the server shows the slots given up as free: a backend outlives
// its client's goodbye for a moment. Nothing else may be connected to srv.
func holdSlots(t *testing.T, srv *localpg.Server, free int) (release func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var held []*pgx.Conn
	release = func() {
		for _, c := range held {
			c.Close(context.Background())
		}
		held = nil
	}
	t.Cleanup(release)
	for {
		conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
		if err != nil {
			var pe *pgconn.PgError
			require.True(t, errors.As(err, &pe) && pe.Code == pgerrcode.TooManyConnections, "filling the server's slots: %v", err)
			break
		}
		held = append(held, conn)
	}
	require.Greater(t, len(held), free)
	for range free {
		held[len(held)-1].Close(ctx)
		held = held[:len(held)-1]
	}
	for {
		var n int
		require.NoError(t, held[0].QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend'`).Scan(&n))
		if n == len(held) {
			return release
		}
		require.NoError(t, ctx.Err(), "waiting for %d slots to be free: %d client backends", free, n)
		time.Sleep(20 * time.Millisecond)
	}
}

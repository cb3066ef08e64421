package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
)

// shardid catalog repair --from-hosts on a catalog the hosts show to be
// older (pg2 records shard 0, pg1's in the catalog, at a generation the
// catalog has not reached): init refuses and verify fails, each naming
// the repair; the repair shows the plan and changes nothing without
// --yes (exit 1), applies it with --yes, and then has nothing to do. The
// JSON plan's shape is golden.
func TestCatalogRepairFromHosts(t *testing.T) {
	t.Parallel()
	path, dsns := clusterFile(t, 6)
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	ctx := context.Background()
	var gen int64
	require.NoError(t, pgtest.Pool(t, cfg.Catalog).QueryRow(ctx, `SELECT generation FROM shardid.cluster`).Scan(&gen))
	_, err = pgtest.Pool(t, dsns[1]).Exec(ctx, `INSERT INTO shardid.local_shards (shard, schema_name, state, generation) VALUES (0, 'shard_0000', 'active', $1)`, gen+5)
	require.NoError(t, err)

	_, stderr, code := runClusterCmdStderr(t, "init", "--config", path)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "shardid catalog repair --from-hosts")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)
	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "FAIL catalog-stale shard 0 on pg1: the catalog places shard 0 here, but pg2 holds it live at generation")
	require.Contains(t, out, "(rebuild the catalog's map from the hosts' records: shardid catalog repair --from-hosts)")

	out, code = runClusterCmd(t, "catalog", "repair", "--config", path)
	require.Equal(t, 2, code, out)
	plan := goldenCmd(t, 1, "catalog", "repair", "--from-hosts", "--config", path, "--json")
	checkGolden(t, "catalog-repair.json.shape", jsonShape(t, plan))
	var p struct {
		Applied bool
		Shards  []struct {
			Shard    int
			From, To string
		}
	}
	require.NoError(t, json.Unmarshal(plan, &p))
	require.False(t, p.Applied)
	require.Len(t, p.Shards, 1)
	require.Equal(t, [3]any{0, "pg1", "pg2"}, [3]any{p.Shards[0].Shard, p.Shards[0].From, p.Shards[0].To})
	var same int64
	require.NoError(t, pgtest.Pool(t, cfg.Catalog).QueryRow(ctx, `SELECT generation FROM shardid.cluster`).Scan(&same))
	require.Equal(t, gen, same, "the plan alone changes nothing")

	out, code = runClusterCmd(t, "catalog", "repair", "--from-hosts", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "~ shard 0: pg1 shard_0000 (active) -> pg2 shard_0000 (active, recorded at generation")
	require.Contains(t, out, "not applied (run it again with --yes)")
	out, code = runClusterCmd(t, "catalog", "repair", "--from-hosts", "--yes", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "catalog repair: applied at generation")
	var host string
	require.NoError(t, pgtest.Pool(t, cfg.Catalog).QueryRow(ctx, `SELECT host FROM shardid.shards WHERE id = 0`).Scan(&host))
	require.Equal(t, "pg2", host)
	out, code = runClusterCmd(t, "catalog", "repair", "--from-hosts", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "nothing to do")
}

// The catalog's schema shardid dropped (a catalog emptied by hand or by
// a failed restore) while the hosts hold the cluster: init refuses in one
// line naming the repair, verify fails the catalog naming it, the repair
// shows the catalog it would create and, with --yes, creates it from the
// hosts' records; then verify passes and init has nothing to do. Before,
// the repair stopped at "cluster not initialised" (issue 27, item 4).
func TestCatalogRepairRebuildsADroppedCatalogSchema(t *testing.T) {
	t.Parallel()
	path, _ := clusterFile(t, 6)
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Equal(t, 0, code, out)
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	ctx := context.Background()
	cat := pgtest.Pool(t, cfg.Catalog)
	var identity string
	require.NoError(t, cat.QueryRow(ctx, `SELECT identity::text FROM shardid.cluster`).Scan(&identity))
	_, err = cat.Exec(ctx, `DROP SCHEMA shardid CASCADE`)
	require.NoError(t, err)

	_, stderr, code := runClusterCmdStderr(t, "init", "--config", path)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "shardid catalog repair --from-hosts rebuilds it")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)
	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `FAIL catalog: the catalog holds no cluster (emptied?), but host pg1 records 2 shards of cluster "cli"`)
	require.Contains(t, out, "(rebuild the catalog's map from the hosts' records: shardid catalog repair --from-hosts)")

	out, code = runClusterCmd(t, "catalog", "repair", "--from-hosts", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "+ cluster cli: the catalog holds none; created from the hosts' records (identity "+identity+")")
	require.Contains(t, out, "+ shard 5: pg3 shard_0005 (active, recorded at generation 1)")
	plan := goldenCmd(t, 1, "catalog", "repair", "--from-hosts", "--config", path, "--json")
	var p struct {
		CreateCatalog bool   `json:"create_catalog"`
		Identity      string `json:"identity"`
	}
	require.NoError(t, json.Unmarshal(plan, &p))
	require.Equal(t, identity, p.Identity)
	require.True(t, p.CreateCatalog)
	out, code = runClusterCmd(t, "catalog", "repair", "--from-hosts", "--yes", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "catalog repair: applied at generation 2: 6 shards placed anew, 3 hosts added")

	out, code = runClusterCmd(t, "verify", "--config", path)
	require.Equal(t, 0, code, out)
	out, code = runClusterCmd(t, "init", "--config", path, "--json")
	require.Equal(t, 0, code, out)
	var res struct {
		CatalogCreated bool     `json:"catalog_created"`
		CatalogChanges []string `json:"catalog_changes"`
		Installed      int      `json:"installed"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, [3]any{false, 0, 0}, [3]any{res.CatalogCreated, len(res.CatalogChanges), res.Installed}, out)
	out, code = runClusterCmd(t, "catalog", "repair", "--from-hosts", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "nothing to do")
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/schematest"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
)

// Every command that opens the catalog reads its schema version first.
// Against a catalog migrated one step beyond this binary, a dirty one and
// an older one, each command either works (where docs/upgrading.md says
// reading is safe, and init upgrading an older catalog) or refuses with one
// line naming both versions and what to do, and changes nothing.
func TestCommandsCheckCatalogSchema(t *testing.T) {
	t.Parallel()
	n, prev := shardmgr.CatalogSchema, schematest.PreviousCatalog
	var (
		tooNew = fmt.Sprintf("this catalog was upgraded to schema %d by a newer shardid; this binary knows %d (upgrade the binary; shardid version shows the schema it knows)", n+1, n)
		dirty  = fmt.Sprintf("this catalog is dirty at schema %d: migration %d failed half way; this binary knows %d (repair it by hand and clear the dirty flag: see docs/upgrading.md)", n, n, n)
		tooOld = fmt.Sprintf("this catalog is at schema %d; this binary needs %d (run shardid init with this binary to upgrade it)", prev, n)
	)
	dir := "../../testdata/migrations"
	commands := []struct {
		name string
		args []string
	}{
		{"status", []string{"status"}},
		{"verify", []string{"verify"}},
		{"migrate up", []string{"migrate", "up", "--dir", dir}},
		{"migrate status", []string{"migrate", "status", "--dir", dir}},
		{"rebalance apply", []string{"rebalance", "apply"}},
		{"init", []string{"init"}}, // last: it upgrades an older catalog
	}
	// want: command -> "" when it works, else the error line.
	states := []struct {
		state string
		want  map[string]string
	}{
		{schematest.CatalogNewerAdditive, map[string]string{
			"status": "", "verify": "", "migrate status": "",
			"migrate up": tooNew, "rebalance apply": tooNew, "init": tooNew,
		}},
		{schematest.CatalogNewerBreaking, map[string]string{
			"status": tooNew, "verify": tooNew, "migrate status": tooNew,
			"migrate up": tooNew, "rebalance apply": tooNew, "init": tooNew,
		}},
		{schematest.CatalogDirty, map[string]string{
			"status": dirty, "verify": dirty, "migrate status": dirty,
			"migrate up": dirty, "rebalance apply": dirty, "init": dirty,
		}},
		{schematest.CatalogOlder, map[string]string{
			"status": tooOld, "verify": tooOld, "migrate status": tooOld,
			"migrate up": tooOld, "rebalance apply": tooOld, "init": "",
		}},
	}
	for _, st := range states {
		t.Run(st.state, func(t *testing.T) {
			t.Parallel()
			path := clusterPath(t, 6)
			out, code := runClusterCmd(t, "init", "--config", path)
			require.Zero(t, code, out)
			cfg, err := shardmgr.LoadConfig(path)
			require.NoError(t, err)
			schematest.SetCatalog(t, cfg.Catalog, st.state)
			version, isDirty := schematest.CatalogVersion(t, cfg.Catalog)
			gen := schematest.Generation(t, cfg.Catalog)
			for _, c := range commands {
				out, err := runCmd(t, append(c.args, "--config", path)...)
				want := st.want[c.name]
				if want == "" {
					require.NoError(t, err, "%s: %s", c.name, out)
					continue
				}
				require.Error(t, err, "%s: %s", c.name, out)
				require.Equal(t, 1, exitCode(err), c.name)
				require.Equal(t, want, errorWithHint(err), c.name)
				v, d := schematest.CatalogVersion(t, cfg.Catalog)
				require.Equal(t, []any{version, isDirty}, []any{v, d}, "%s changed the catalog's schema", c.name)
				require.Equal(t, gen, schematest.Generation(t, cfg.Catalog), "%s changed the catalog", c.name)
			}
			if st.state == schematest.CatalogDirty {
				// The repair of docs/upgrading.md: the failed migration
				// changed nothing, so mark the catalog clean at N-1; init
				// then applies N again.
				_, err := pgtest.Pool(t, cfg.Catalog).Exec(context.Background(),
					`UPDATE shardid.catalog_migrations SET version = $1, dirty = false`, schematest.PreviousCatalog)
				require.NoError(t, err)
				out, code := runClusterCmd(t, "init", "--config", path)
				require.Zero(t, code, out)
				require.Contains(t, out, fmt.Sprintf("upgraded the catalog schema from %d to %d\n", schematest.PreviousCatalog, shardmgr.CatalogSchema))
				out, code = runClusterCmd(t, "verify", "--config", path)
				require.Zero(t, code, out)
			}
			if st.state == schematest.CatalogOlder {
				// init upgraded it, said so, and the others now work.
				v, d := schematest.CatalogVersion(t, cfg.Catalog)
				require.Equal(t, []any{int64(shardmgr.CatalogSchema), false}, []any{v, d})
				out, code := runClusterCmd(t, "status", "--config", path)
				require.Zero(t, code, out)
			}
		})
	}
}

// init says that it upgraded an older catalog, in text and in --json.
func TestInitSaysItUpgradedTheCatalog(t *testing.T) {
	t.Parallel()
	path := clusterPath(t, 4)
	out, code := runClusterCmd(t, "init", "--config", path)
	require.Zero(t, code, out)
	require.NotContains(t, out, "upgraded the catalog schema")
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	schematest.SetCatalog(t, cfg.Catalog, schematest.CatalogOlder)
	out, code = runClusterCmd(t, "init", "--config", path)
	require.Zero(t, code, out)
	require.Contains(t, out, fmt.Sprintf("upgraded the catalog schema from %d to %d\n", schematest.PreviousCatalog, shardmgr.CatalogSchema))

	schematest.SetCatalog(t, cfg.Catalog, schematest.CatalogOlder)
	out, code = runClusterCmd(t, "init", "--config", path, "--json")
	require.Zero(t, code, out)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, map[string]any{"from": float64(schematest.PreviousCatalog), "to": float64(shardmgr.CatalogSchema)}, res["catalog_upgrade"])
	out, code = runClusterCmd(t, "init", "--config", path, "--json")
	require.Zero(t, code, out)
	require.NotContains(t, out, "catalog_upgrade", "an up-to-date catalog is not upgraded")
}

package rebalance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// applyHosts applies cfg's hosts to the catalog (init, the one step that
// does): a move or apply refuses a file the catalog does not agree with.
func applyHosts(t testing.TB, cfg *shardmgr.Config) {
	t.Helper()
	_, err := install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
}

func sampleSet(t testing.TB) *migrate.MigrationSet {
	t.Helper()
	set, err := migrate.LoadMigrationDir(clustertest.SampleMigrations)
	require.NoError(t, err)
	return set
}

func setOf(t testing.TB, files map[string]string) *migrate.MigrationSet {
	t.Helper()
	set, err := migrate.LoadMigrationSet(clustertest.MapFS(files))
	require.NoError(t, err)
	return set
}

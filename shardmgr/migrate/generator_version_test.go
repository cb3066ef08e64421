package migrate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
	shsql "github.com/shardid/shardid/sql"
)

// A generator installed by a newer shardid is left as it is: replacing it
// would downgrade it. The error says so (ErrGeneratorTooNew); the other
// shards are judged as usual.
func TestUpgradeGeneratorsRefusesNewerGenerator(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 4)
	m := clustertest.ClusterMap(t, cfg)
	p := shardPool(t, cfg, m, 1)
	cur, err := shsql.Marker(catalog.GeneratorParams(m, 1))
	require.NoError(t, err)
	newer := strings.Replace(cur, fmt.Sprintf("generator v%d ", shsql.Version), fmt.Sprintf("generator v%d ", shsql.Version+1), 1)
	require.NotEqual(t, cur, newer)
	_, err = p.Exec(clustertest.Ctx(t), fmt.Sprintf(`COMMENT ON FUNCTION shard_0001.next_id() IS '%s'`, newer))
	require.NoError(t, err)

	res, err := migrate.UpgradeGenerators(clustertest.Ctx(t), clustertest.Handle(t, cfg), migrate.GeneratorOptions{})
	require.ErrorIs(t, err, migrate.ErrGeneratorTooNew)
	require.ErrorContains(t, err, fmt.Sprintf("is generator v%d; this binary writes v%d", shsql.Version+1, shsql.Version))
	up, unchanged, failed := res.Counts()
	require.Equal(t, [3]int{0, 3, 1}, [3]int{up, unchanged, failed})
	require.Equal(t, newer, marker(t, p, "shard_0001"))
}

package install

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
	shsql "github.com/shardid/shardid/sql"
)

// generator: c makes init create the extension on every host and install
// the C generator; changing the cluster file's generator and running init
// again switches every shard, on the same counter: ids keep increasing and
// verify (deep: no stored id twice) passes and names the generator each
// shard runs.
func TestInitSwitchesGenerators(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 6, false)
	var last int64
	for i, gen := range []string{shsql.GeneratorC, shsql.GeneratorPLpgSQL, shsql.GeneratorAuto} {
		cfg.Generator = gen
		_, err := Init(ctx, clustertest.Handle(t, cfg), InitOptions{})
		require.NoError(t, err, gen)
		want := gen
		if gen == shsql.GeneratorAuto {
			want = shsql.GeneratorC // the extension init created for c is there
		}
		rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{Deep: true})
		require.NoError(t, err)
		require.True(t, rep.OK, "verify after %s: %v", gen, rep.Problems)
		require.Equal(t, []verify.GeneratorCount{{Kind: want, Count: 6, Shards: "0-5"}}, rep.Generators, gen)

		pool := clustertest.HostPool(t, cfg, "pg1")
		if i == 0 {
			_, err = pool.Exec(ctx, "CREATE TABLE shard_0000.likes (id bigint PRIMARY KEY DEFAULT shard_0000.next_id(), v int)")
			require.NoError(t, err)
		}
		var lo, hi int64
		require.NoError(t, pool.QueryRow(ctx, `WITH ins AS (INSERT INTO shard_0000.likes (v) SELECT g FROM generate_series(1, 5000) g RETURNING id)
			SELECT min(id), max(id) FROM ins`).Scan(&lo, &hi))
		require.Greater(t, lo, last, "ids after the switch to %s follow the ones before", gen)
		last = hi
	}
}

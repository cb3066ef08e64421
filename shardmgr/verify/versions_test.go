package verify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	shsql "github.com/shardid/shardid/sql"
)

// verify tells a generator older than this binary installs (fix: shardid
// migrate generator) from one a newer shardid installed (fix: upgrade the
// binary), and a host schema newer than this binary knows or dirty, each as
// its own problem rather than a generic mismatch.
func TestVerifyReportsSchemaVersions(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	setVersion := func(shard, version int) {
		cur, err := shsql.Marker(shsql.Params{Shard: shard})
		require.NoError(t, err)
		marker := strings.Replace(cur, fmt.Sprintf("generator v%d ", shsql.Version), fmt.Sprintf("generator v%d ", version), 1)
		exec(t, cfg, m.Shards[shard].Host, fmt.Sprintf("COMMENT ON FUNCTION shard_%04d.next_id() IS '%s'", shard, marker))
	}
	setVersion(1, shsql.Version-1)
	setVersion(4, shsql.Version+1)
	exec(t, cfg, "pg2", "UPDATE shardid.host_migrations SET version = version + 1")
	exec(t, cfg, "pg3", "UPDATE shardid.host_migrations SET dirty = true")

	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	got := map[string]string{}
	for _, p := range rep.Problems {
		got[fmt.Sprintf("%s %d %s", p.Check, p.Shard, p.Host)] += p.Detail
		if p.Check == CheckGenerator && p.Shard == 1 {
			require.Equal(t, FixGenerator, p.Fix, "the CLI says: run shardid migrate generator")
		}
	}
	want := map[string]string{
		fmt.Sprintf("generator 1 %s", m.Shards[1].Host): fmt.Sprintf("shard_0001.next_id() is generator v%d, older than the v%d this binary installs", shsql.Version-1, shsql.Version),
		fmt.Sprintf("generator 4 %s", m.Shards[4].Host): fmt.Sprintf("shard_0004.next_id() is generator v%d, installed by a newer shardid; this binary knows v%d (upgrade the binary)", shsql.Version+1, shsql.Version),
		"host-record -1 pg2":                            fmt.Sprintf("host pg2's shardid schema was upgraded to schema %d by a newer shardid; this binary knows %d (upgrade the binary)", shardmgr.HostSchema+1, shardmgr.HostSchema),
		"host-record -1 pg3":                            fmt.Sprintf("host pg3's shardid schema is dirty at schema %[1]d: migration %[1]d failed half way; this binary knows %[1]d (repair it by hand: docs/upgrading.md)", shardmgr.HostSchema),
	}
	for k, v := range want {
		require.Equal(t, v, got[k], "%s; problems: %v", k, rep.Problems)
	}
	require.Len(t, rep.Problems, len(want), "%v", rep.Problems)
}

package install

import (
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// TestInitOneHostFailsOthersFinish: a host that fails as a whole (here its
// role may not create the toolkit's schema in its database) fails its own
// shards, reported at the end; the other hosts' shards are installed, and
// init run again once the host is fixed finishes it.
func TestInitOneHostFailsOthersFinish(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 9, true)
	role := clustertest.Role(t, cfg, "nocreate") // a login role, no CREATE on the database
	u, err := url.Parse(cfg.Hosts[2].DSN)
	require.NoError(t, err)
	superDSN := cfg.Hosts[2].DSN
	u.User = url.User(role)
	cfg.Hosts[2].DSN = u.String()

	res, err := Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	var se *shardmgr.ShardErrors
	require.ErrorAs(t, err, &se)
	require.NotNil(t, res, "the result says what the other hosts did")
	m := clustertest.ClusterMap(t, cfg)
	on3 := m.ShardsOn("pg3")
	require.Len(t, se.Errs, len(on3), "pg3's shards, and only those")
	for _, e := range se.Errs {
		var sh *shardmgr.ShardError
		require.ErrorAs(t, e, &sh)
		require.Equal(t, "pg3", sh.Host)
		require.ErrorContains(t, e, "permission denied")
	}
	require.Equal(t, len(m.ShardsOn("pg1"))+len(m.ShardsOn("pg2")), res.Installed, "the other hosts finished")

	// Fixed (the role may create in its database), init finishes pg3.
	_, err = clustertest.Pool(t, superDSN).Exec(clustertest.Ctx(t), `GRANT CREATE ON DATABASE `+pgx.Identifier{u.Path[1:]}.Sanitize()+` TO `+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	res, err = Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), InitOptions{})
	require.NoError(t, err)
	require.Equal(t, len(on3), res.Installed)
}

package verify

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
)

// init records each host's server (system identifier, timeline); verify
// fails a host whose DSN reaches another server than recorded, or a server
// on an older timeline (the old primary after a failover). The promoted
// standby reached without `shardid host failover` is failed in the hosts
// package's failover test, with the repair.
func TestVerifyComparesTheRecordedServer(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	ctx := clustertest.Ctx(t)
	cat := clustertest.Pool(t, cfg.Catalog)
	var unrecorded int
	require.NoError(t, cat.QueryRow(ctx, `SELECT count(*) FROM shardid.hosts WHERE system_identifier IS NULL OR timeline IS NULL`).Scan(&unrecorded))
	require.Zero(t, unrecorded, "init records every host's server")

	rep, err := Verify(ctx, clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Failed(CheckFailover))
	require.Contains(t, rep.Checks, CheckFailover)

	_, err = cat.Exec(ctx, `UPDATE shardid.hosts SET timeline = 5 WHERE name = 'pg1'`)
	require.NoError(t, err)
	_, err = cat.Exec(ctx, `UPDATE shardid.hosts SET system_identifier = '42' WHERE name = 'pg2'`)
	require.NoError(t, err)
	rep, err = Verify(ctx, clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	probs := rep.Failed(CheckFailover)
	require.Len(t, probs, 2, "%v", rep.Problems)
	require.Equal(t, "pg1", probs[0].Host)
	require.Contains(t, probs[0].Detail, "timeline 1, older than the 5 the catalog recorded: the DSN reaches the old primary")
	require.Equal(t, "pg2", probs[1].Host)
	require.Contains(t, probs[1].Detail, "the catalog recorded 42: another server")
}

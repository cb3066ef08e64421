package hosts

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// TestFailoverRefusedWhileTheOldPrimaryRuns: a failover to the promoted
// standby while the old primary still answers as a primary (taking
// writes: the router writes there) is refused, saying to stop it, and
// changes nothing (catalog, cluster file); once the old primary stops, the
// same failover goes through, but not to a database of the promoted
// server whose host record another role forged (shardmgr.ErrHostUnproven).
// Before, it went through at once, and both servers took writes, and the
// forged record was accepted (failed before).
func TestFailoverRefusedWhileTheOldPrimaryRuns(t *testing.T) {
	r := newFailoverRig(t, 0)
	ctx := r.ctx
	require.NotEmpty(t, r.write(time.Second))
	require.NoError(t, r.primary.WaitReplayed(ctx, r.standby, 2*time.Minute))
	require.NoError(t, r.standby.Promote(ctx, 2*time.Minute))

	genBefore := clustertest.ClusterMap(t, r.cfg).Generation
	file, err := os.ReadFile(r.path)
	require.NoError(t, err)
	_, err = Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: r.standbyDSN})
	require.ErrorIs(t, err, ErrOldServerWritable)
	require.ErrorContains(t, err, "still answers as a primary (not in recovery), beside the new one: stop it")
	require.NotContains(t, err.Error(), "\n")
	require.Equal(t, genBefore, clustertest.ClusterMap(t, r.cfg).Generation, "the catalog changed")
	now, err := os.ReadFile(r.path)
	require.NoError(t, err)
	require.Equal(t, string(file), string(now), "the cluster file changed")
	require.NotEmpty(t, r.write(time.Second), "the old primary still takes the router's writes")

	require.NoError(t, r.primary.Halt())

	// A non-superuser that owns a database of the promoted server forged
	// the host's record there (the right cluster, host name and cluster
	// identity): refused, nothing changed.
	forger := fmt.Sprintf("forger_%d", clustertest.DBCounter.Add(1))
	clustertest.ForgeHostRecord(t, r.cfg, r.standby.DSN("postgres"), r.standby.DSN("forged"), "forged", forger, "pg1")
	_, err = Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: r.standby.DSN("forged")})
	require.ErrorIs(t, err, shardmgr.ErrHostUnproven)
	require.ErrorContains(t, err, "schema shardid belongs to "+forger)
	require.Equal(t, genBefore, clustertest.ClusterMap(t, r.cfg).Generation, "the catalog changed")

	res, err := Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: r.standbyDSN})
	require.NoError(t, err)
	require.Greater(t, res.Generation, genBefore)
}

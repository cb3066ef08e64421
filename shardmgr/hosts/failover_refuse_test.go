package hosts

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	shsql "github.com/shardid/shardid/sql"
)

// TestFailoverRefusesAnotherServer: a failover to anything but the
// promoted standby of the host's server is refused with one error naming
// why, and changes nothing (catalog generation and DSN, the counters of
// the server named).
func TestFailoverRefusesAnotherServer(t *testing.T) {
	r := newFailoverRig(t, 0)
	ctx := r.ctx
	cat := clustertest.Pool(t, r.cfg.Catalog)
	genBefore := clustertest.ClusterMap(t, r.cfg).Generation
	_, err := r.primary.CreateDatabase(ctx, "other")
	require.NoError(t, err)
	require.NoError(t, r.primary.WaitReplayed(ctx, r.standby, 2*time.Minute))

	// The counters of the server at dsn (-1 where a shard has none).
	counters := func(dsn string) []int64 {
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var out []int64
		for _, s := range r.schemas {
			c, err := nextCounter(ctx, conn, s)
			if err != nil {
				c = -1
			}
			out = append(out, c)
		}
		return out
	}
	try := func(to string, want error, detail string) {
		t.Helper()
		before := counters(to)
		_, err := Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: to})
		require.ErrorIs(t, err, want)
		require.ErrorContains(t, err, detail)
		require.NotContains(t, err.Error(), "\n")
		m := clustertest.ClusterMap(t, r.cfg)
		require.Equal(t, genBefore, m.Generation, "the catalog changed")
		var dsn string
		require.NoError(t, cat.QueryRow(ctx, `SELECT dsn FROM shardid.hosts WHERE name = 'pg1'`).Scan(&dsn))
		require.Equal(t, r.primary.DSN("app"), dsn)
		require.Equal(t, before, counters(to), "the counters moved")
	}

	try(r.standbyDSN, ErrNotPromoted, "not promoted yet")
	try(r.primary.DSN("app"), ErrNotStandbyOf, "timeline 1, not newer than the host's server's 1")

	require.NoError(t, r.standby.Promote(ctx, 2*time.Minute))
	_, err = cat.Exec(ctx, `UPDATE shardid.hosts SET system_identifier = '12345' WHERE name = 'pg1'`)
	require.NoError(t, err)
	try(r.standbyDSN, ErrNotStandbyOf, "the host's server's 12345")
	_, err = cat.Exec(ctx, `UPDATE shardid.hosts SET system_identifier = NULL WHERE name = 'pg1'`)
	require.NoError(t, err)
	_, err = Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: r.standbyDSN})
	require.ErrorIs(t, err, ErrNotIdentified)

	// init records the identity again where none is recorded.
	_, err = installInit(t, r.cfg)
	require.NoError(t, err)
	var sysid *string
	require.NoError(t, cat.QueryRow(ctx, `SELECT system_identifier FROM shardid.hosts WHERE name = 'pg1'`).Scan(&sysid))
	require.NotNil(t, sysid)

	// A database of the promoted server that is not the host's.
	try(r.standby.DSN("other"), ErrNotStandbyOf, `records cluster "" host ""`)

	_, err = Failover(ctx, clustertest.Handle(t, r.cfg), "nosuch", FailoverOptions{To: r.standbyDSN})
	require.ErrorIs(t, err, shardmgr.ErrUnknownHost)

	// A session on the promoted server holding a shard's generator lock
	// stops the advance within LockWait, and the error names it; the
	// catalog records nothing. The old primary stops first: while it
	// answers as a primary, every failover is refused before the advance
	// (TestFailoverRefusedWhileTheOldPrimaryRuns).
	require.NoError(t, r.primary.Halt())
	holder, err := pgx.Connect(ctx, r.standbyDSN)
	require.NoError(t, err)
	defer holder.Close(ctx)
	_, err = holder.Exec(ctx, `SET application_name = 'squatter'`)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int64(shsql.LockClass), len(r.schemas)-1)
	require.NoError(t, err)
	_, err = Failover(ctx, clustertest.Handle(t, r.cfg), "pg1", FailoverOptions{To: r.standbyDSN, LockWait: time.Second})
	require.ErrorIs(t, err, shardmgr.ErrLockWait)
	require.ErrorContains(t, err, fmt.Sprintf("pid %d", holder.PgConn().PID()))
	require.ErrorContains(t, err, `application "squatter"`)
	require.Equal(t, genBefore, clustertest.ClusterMap(t, r.cfg).Generation, "the catalog changed")
}

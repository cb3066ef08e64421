package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A managed server's timeouts, set for the toolkit's role (ALTER ROLE ...
// SET, as a DBA would; a role that is not a superuser), do not reach the
// handle's sessions: a statement runs past statement_timeout, a
// transaction idles past idle_in_transaction_session_timeout and, on
// PostgreSQL 17+, lives past transaction_timeout, in the pools and the
// single connections alike. A session kind's own StatementTimeout still
// holds. Failed before: pg_sleep(1.5) ended at the role's 1 s.
func TestSessionsOverrideServerTimeouts(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg := clustertest.Cluster(t, 1, true)
	role := clustertest.Role(t, cfg, "timed")
	admin := clustertest.HostPool(t, cfg, "pg1")
	var major int
	require.NoError(t, admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::int / 10000`).Scan(&major))
	q := pgx.Identifier{role}.Sanitize()
	sets := `ALTER ROLE ` + q + ` SET statement_timeout = '1s';
		ALTER ROLE ` + q + ` SET idle_in_transaction_session_timeout = '1s'`
	if major >= 17 {
		sets += `; ALTER ROLE ` + q + ` SET transaction_timeout = '1s'`
	}
	_, err := admin.Exec(ctx, sets)
	require.NoError(t, err)

	// The role's settings hold for its own sessions outside the toolkit.
	plain, err := pgx.Connect(ctx, clustertest.AsRole(t, cfg.Hosts[0].DSN, role))
	require.NoError(t, err)
	_, err = plain.Exec(ctx, `SELECT pg_sleep(1.5)`)
	require.Contains(t, []string{"statement_timeout", "transaction_timeout"}, pgsession.TimeoutSetting(err), "%v", err)
	plain.Close(ctx)

	managed := *cfg
	managed.Hosts = append([]shardmgr.Host(nil), cfg.Hosts...)
	managed.Hosts[0].DSN = clustertest.AsRole(t, cfg.Hosts[0].DSN, role)
	c := clustertest.Handle(t, &managed)

	pool, err := c.HostPool(ctx, "pg1", cluster.Session{})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT pg_sleep(1.5)`)
	require.NoError(t, err, "a statement past the role's statement_timeout")
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	_, err = tx.Exec(ctx, `SELECT pg_sleep(0.5)`)
	require.NoError(t, err, "a transaction idle past idle_in_transaction_session_timeout (and older than transaction_timeout on 17+)")
	require.NoError(t, tx.Commit(ctx))

	conn, err := c.HostConn(ctx, "pg1", cluster.Session{Application: "single"})
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `SELECT pg_sleep(1.5)`)
	require.NoError(t, err, "a single connection's statement")
	if major >= 17 {
		var tt string
		require.NoError(t, conn.QueryRow(ctx, `SHOW transaction_timeout`).Scan(&tt))
		require.Equal(t, "0", tt)
	}

	bounded, err := c.HostPool(ctx, "pg1", cluster.Session{StatementTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	_, err = bounded.Exec(ctx, `SELECT pg_sleep(1)`)
	require.ErrorContains(t, err, "statement timeout", "a session kind's own bound")
}

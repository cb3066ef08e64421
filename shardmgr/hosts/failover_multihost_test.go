package hosts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/verify"
)

// TestFailoverMultiHostDSN: a host whose DSN names its primary and its
// standby (target_session_attrs=read-write). After the primary dies and
// the standby is promoted, the router's writes land on the promoted
// server by themselves; verify fails the host until `host failover` runs
// with the same DSN, which advances the counters past the old primary's
// ids and keeps the DSN; verify then passes.
func TestFailoverMultiHostDSN(t *testing.T) {
	ctx := clustertest.Ctx(t)
	cat := pgtest.Servers(t, 1)[0]
	n := clustertest.DBCounter.Add(1)
	catDB := fmt.Sprintf("fo%d_catalog", n)
	_, err := cat.CreateDatabase(ctx, catDB)
	require.NoError(t, err)
	clustertest.DropLater(t, cat, catDB)
	primary := pgtest.Own(t, localpg.Options{})
	_, err = primary.CreateDatabase(ctx, "app")
	require.NoError(t, err)
	standby, err := primary.NewAsyncStandby(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { standby.Stop() })

	dsn := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d dbname=app user=postgres sslmode=disable target_session_attrs=read-write", primary.Port, standby.Port)
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "cluster: fo%d\nshards: 2\ncatalog: %s\nhosts:\n  - name: pg1\n    dsn: '%s'\n", n, cat.DSN(catDB), dsn), 0o600))
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	_, err = installInit(t, cfg)
	require.NoError(t, err)
	p := clustertest.Pool(t, primary.DSN("app"))
	for _, s := range []string{"shard_0000", "shard_0001"} {
		_, err := p.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY DEFAULT %s(), v int)`,
			pgx.Identifier{s, "items"}.Sanitize(), pgx.Identifier{s, "next_id"}.Sanitize()))
		require.NoError(t, err)
	}
	require.NoError(t, primary.WaitReplayed(ctx, standby, 2*time.Minute))

	r := clustertest.OpenRouter(t, cfg)
	insert := func() (int64, error) {
		var id int64
		err := r.Tx(ctx, 0, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			return tx.QueryRow(ctx, fmt.Sprintf(`INSERT INTO %s (v) VALUES (1) RETURNING id`, s.Table("items"))).Scan(&id)
		})
		return id, err
	}
	before, err := insert()
	require.NoError(t, err)

	primary.KillHard()
	require.NoError(t, standby.Promote(ctx, 2*time.Minute))
	// The router follows by itself: a retry lands on the promoted server.
	var after int64
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if after, err = insert(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err, "the router did not follow the promotion")
	require.NotEqual(t, before, after)

	rep, err := verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.Len(t, rep.Failed(verify.CheckFailover), 1, "%v", rep.Problems)

	res, err := Failover(ctx, clustertest.Handle(t, cfg), "pg1", FailoverOptions{To: dsn})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Timeline)
	require.Equal(t, dsn, res.DSN, "the catalog keeps the multi-host DSN")
	for _, a := range res.Shards {
		require.Greater(t, a.After, before)
	}
	clustertest.Reopen(t, cfg)
	rep, err = verify.Verify(ctx, clustertest.Handle(t, cfg), verify.Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Failed(verify.CheckFailover), "%v", rep.Problems)
}

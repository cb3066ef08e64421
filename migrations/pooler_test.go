package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

// serve's preparation of a segment source through PgBouncer failed on
// "unsupported startup parameter: lock_timeout", which names nothing to
// change (issue 28). A run through a pooler is refused before it creates
// anything, saying to give it a direct DSN, and naming a transaction-mode
// pooler as such. Failed before (PgBouncer's own refusal came back).
func TestUpRefusesAPooler(t *testing.T) {
	t.Parallel()
	s := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, s)
	for mode, says := range map[string]string{localpg.PoolTransaction: "transaction pooling", localpg.PoolSession: "session pooling"} {
		b := pgtest.Bouncer(t, s, localpg.BouncerOptions{PoolMode: mode})
		err := migrations.Up(context.Background(), b.Via(dsn), migrations.Segment)
		require.ErrorIs(t, err, migrations.ErrPooler, mode)
		require.ErrorContains(t, err, "give it a direct DSN")
		require.ErrorContains(t, err, says)
		require.NotContains(t, err.Error(), "\n")
	}
	var exists bool
	require.NoError(t, pgtest.Pool(t, dsn).QueryRow(context.Background(),
		`SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'shardid')`).Scan(&exists))
	require.False(t, exists, "nothing created")
	require.NoError(t, migrations.Up(context.Background(), dsn, migrations.Segment), "directly it runs")
}

// With WithPoolerCheck (serve's sources), Up through a pooler migrates
// nothing and checks the version with plain queries: a database not
// migrated yet is a *PoolerError naming the version table and saying to
// migrate it through a direct DSN; once it is migrated directly, Up
// through the pooler passes.
func TestUpWithPoolerCheck(t *testing.T) {
	t.Parallel()
	s := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, s)
	b := pgtest.Bouncer(t, s, localpg.BouncerOptions{PoolMode: localpg.PoolTransaction, PoolSize: 1})
	ctx := context.Background()
	err := migrations.Up(ctx, b.Via(dsn), migrations.Segment, migrations.WithPoolerCheck())
	var pe *migrations.PoolerError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, migrations.ErrPooler)
	require.Equal(t, uint(0), pe.Version)
	require.ErrorContains(t, err, "shardid.segment_migrations is at version 0")
	require.ErrorContains(t, err, "direct DSN")
	require.NoError(t, migrations.Up(ctx, dsn, migrations.Segment))
	require.NoError(t, migrations.Up(ctx, b.Via(dsn), migrations.Segment, migrations.WithPoolerCheck()))
	require.NoError(t, migrations.Up(ctx, dsn, migrations.Segment, migrations.WithPoolerCheck()), "directly it migrates")
}

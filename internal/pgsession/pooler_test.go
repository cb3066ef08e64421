package pgsession_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/pgsession"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// PgBouncer from the Debian package, in each pooling mode and pool size,
// against PostgreSQL itself.
func TestDetectPooler(t *testing.T) {
	t.Parallel()
	s := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, s)
	ctx := context.Background()
	got, err := pgsession.DetectPooler(ctx, dsn, time.Minute)
	require.NoError(t, err)
	require.Equal(t, pgsession.Direct, got)
	for _, c := range []struct {
		mode string
		size int
		want pgsession.Pooling
	}{
		{localpg.PoolTransaction, 1, pgsession.TransactionPooler},
		{localpg.PoolTransaction, 20, pgsession.TransactionPooler},
		{localpg.PoolSession, 1, pgsession.SessionPooler},
		{localpg.PoolSession, 20, pgsession.SessionPooler},
	} {
		b := pgtest.Bouncer(t, s, localpg.BouncerOptions{PoolMode: c.mode, PoolSize: c.size})
		got, err := pgsession.DetectPooler(ctx, b.Via(dsn), time.Minute)
		require.NoError(t, err, "%s pool of %d", c.mode, c.size)
		require.Equal(t, c.want, got, "%s pool of %d", c.mode, c.size)
	}
}

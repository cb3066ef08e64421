package pgdatabase_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/pgdatabase"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// missingDSN names a database that does not exist yet on the shared
// server, without sslmode: pgx then tries TLS first, as a user's DSN does.
func missingDSN(t *testing.T) string {
	s := pgtest.Servers(t, 1)[0]
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/missing_%d", s.Port, time.Now().UnixNano())
}

func TestEnsureCreatesOnceUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	dsn := missingDSN(t)
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pgdatabase.Ensure(ctx, dsn)
			require.NoError(t, err)
			if c {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, created.Load())
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	conn.Close(ctx)
	c, err := pgdatabase.Ensure(ctx, dsn)
	require.NoError(t, err)
	require.False(t, c, "an existing database is left alone")
}

func TestExplainPutsTheServersMessageFirst(t *testing.T) {
	_, err := pgx.Connect(context.Background(), missingDSN(t))
	require.Error(t, err)
	require.Contains(t, err.Error(), "tls error", "the message this package is for")
	got := pgdatabase.Explain(err)
	require.True(t, strings.HasPrefix(got.Error(), `database "missing_`), got.Error())
	require.Contains(t, got.Error(), "does not exist (SQLSTATE 3D000)")
	require.ErrorIs(t, got, err)

	_, err = pgdatabase.Ensure(context.Background(), "postgres://postgres@127.0.0.1:1/x?connect_timeout=2")
	require.ErrorContains(t, err, "connect to x", "no server message: the error as it was")
}

package pgsession_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/pgsession"
)

// With sslmode=prefer (no sslmode in the DSN, as a user's DSN often has
// none) the server's reason comes after pgconn's "tls error" of the first
// attempt; ServerFirst puts it first, on one line, and keeps err for
// errors.Is. Other errors, and one already rewritten, come back as they
// were.
func TestServerFirstPutsTheServersReasonFirst(t *testing.T) {
	s := pgtest.Servers(t, 1)[0]
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/missing_%d", s.Port, time.Now().UnixNano())
	_, err := pgx.Connect(context.Background(), dsn)
	require.Error(t, err)
	require.Contains(t, err.Error(), "tls error", "the message ServerFirst is for")
	require.Less(t, strings.Index(err.Error(), "tls error"), strings.Index(err.Error(), "does not exist"))

	got := pgsession.ServerFirst(err)
	require.True(t, strings.HasPrefix(got.Error(), `FATAL: database "missing_`), got.Error())
	require.Contains(t, got.Error(), "does not exist (SQLSTATE 3D000)")
	require.NotContains(t, got.Error(), "\n")
	require.ErrorIs(t, got, err)
	require.Equal(t, "wrapped: "+got.Error(), pgsession.ServerFirst(fmt.Errorf("wrapped: %w", got)).Error(),
		"a rewritten error is not rewritten again")

	plain := errors.New("not a connection's")
	require.Equal(t, plain, pgsession.ServerFirst(plain))
	require.NoError(t, pgsession.ServerFirst(nil))
}

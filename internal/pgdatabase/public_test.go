package pgdatabase_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/pgdatabase"
)

// A new database is open to PUBLIC; once CONNECT is revoked from PUBLIC
// and granted to one role only, it is not.
func TestPublicCanConnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, s)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	db := conn.Config().Database

	open, err := pgdatabase.PublicCanConnect(ctx, conn, db)
	require.NoError(t, err)
	require.True(t, open)

	role := fmt.Sprintf("pcc_%d", time.Now().UnixNano())
	ident := pgx.Identifier{db}.Sanitize()
	_, err = conn.Exec(ctx, "CREATE ROLE "+role+"; REVOKE CONNECT ON DATABASE "+ident+" FROM PUBLIC; GRANT CONNECT ON DATABASE "+ident+" TO "+role)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), s.DSN("postgres"))
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE); DROP ROLE IF EXISTS "+role)
			c.Close(context.Background())
		}
	})
	open, err = pgdatabase.PublicCanConnect(ctx, conn, db)
	require.NoError(t, err)
	require.False(t, open)

	_, err = pgdatabase.PublicCanConnect(ctx, conn, "no_such_database")
	require.ErrorContains(t, err, "no_such_database")
}

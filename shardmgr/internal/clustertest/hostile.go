package clustertest

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Outsider connects to the database of dsn as a new login role that was
// granted nothing (it connects by PUBLIC's default CONNECT), with
// application_name app, as any role allowed to connect could. It returns
// the connection and the role; both go when the test ends.
func Outsider(t testing.TB, dsn, app string) (*pgx.Conn, string) {
	t.Helper()
	role := fmt.Sprintf("outsider_%d", DBCounter.Add(1))
	admin := Pool(t, dsn)
	_, err := admin.Exec(Ctx(t), `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN`)
	require.NoError(t, err)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(Ctx(t), u.String())
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close(context.Background())
		_, _ = admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+pgx.Identifier{role}.Sanitize())
	})
	return conn, role
}

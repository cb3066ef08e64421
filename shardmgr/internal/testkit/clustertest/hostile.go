package clustertest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
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

// ForgeHostRecord makes, in database db of the server at admin (a
// superuser's DSN of its postgres database), the record of host name of
// cfg's cluster, with the catalog's cluster identity (which every routing
// role may read) and a secret of its own guessing: as role owner (it owns
// the database, created for it), or as the superuser when owner is "".
func ForgeHostRecord(t testing.TB, cfg *shardmgr.Config, adminDSN, dsn, db, owner, name string) {
	t.Helper()
	ctx := Ctx(t)
	admin := Pool(t, adminDSN)
	as := dsn
	if owner != "" {
		_, err := admin.Exec(ctx, `CREATE ROLE `+pgx.Identifier{owner}.Sanitize()+` LOGIN`)
		require.NoError(t, err)
		_, err = admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s OWNER %s`, pgx.Identifier{db}.Sanitize(), pgx.Identifier{owner}.Sanitize()))
		require.NoError(t, err)
		as = AsRole(t, dsn, owner)
	} else {
		_, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{db}.Sanitize())
		require.NoError(t, err)
	}
	var identity string
	require.NoError(t, Pool(t, cfg.Catalog).QueryRow(ctx, `SELECT identity::text FROM shardid.cluster`).Scan(&identity))
	guess := make([]byte, 32)
	_, _ = rand.Read(guess)
	conn, err := pgx.Connect(ctx, as)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE SCHEMA shardid;
		CREATE TABLE shardid.host_info (id boolean PRIMARY KEY DEFAULT true, cluster text NOT NULL, host text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), cluster_identity uuid);
		CREATE TABLE shardid.host_secret (id boolean PRIMARY KEY DEFAULT true, secret bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE shardid.local_shards (shard integer PRIMARY KEY, schema_name text NOT NULL UNIQUE, state text NOT NULL, generation bigint NOT NULL, installed_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO shardid.host_info (cluster, host, cluster_identity) VALUES ($1, $2, $3)`, cfg.Cluster, name, identity)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO shardid.host_secret (secret) VALUES ($1)`, guess)
	require.NoError(t, err)
}

package catalog

import (
	"context"
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// The cluster's identity and the hashes of the hosts' secrets (catalog
// migration 16) are read and written here: by init, which writes the
// identity and a secret to every host, and by set-dsn and failover, which
// accept a database as a host's only when it holds the host's secret
// (hostidentity.CheckSecret).

// ReadIdentity returns the cluster's identity, "" when the catalog
// records none: no cluster yet, no shardid schema, or a catalog older
// than schema 16.
func ReadIdentity(ctx context.Context, q pg.Querier) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT identity::text FROM shardid.cluster`).Scan(&id)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), pg.IsUndefinedTable(err):
		return "", nil
	case errors.As(err, &pe) && (pe.Code == pgerrcode.UndefinedColumn || pe.Code == pgerrcode.InvalidSchemaName):
		return "", nil
	}
	return id, err
}

// ReadHostSecretHash returns the SHA-256 of host name's secret as the
// catalog records it; nil when it records none.
func ReadHostSecretHash(ctx context.Context, q pg.Querier, name string) ([]byte, error) {
	var h []byte
	err := q.QueryRow(ctx, `SELECT secret_sha256 FROM shardid.host_secrets WHERE host = $1`, name).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return h, err
}

// PutHostSecretHash records hash as the SHA-256 of host name's secret.
func PutHostSecretHash(ctx context.Context, q pg.Execer, name string, hash []byte) error {
	_, err := q.Exec(ctx, `INSERT INTO shardid.host_secrets (host, secret_sha256) VALUES ($1, $2)
		ON CONFLICT (host) DO UPDATE SET secret_sha256 = EXCLUDED.secret_sha256, recorded_at = now()
		WHERE host_secrets.secret_sha256 IS DISTINCT FROM EXCLUDED.secret_sha256`, name, hash)
	return err
}

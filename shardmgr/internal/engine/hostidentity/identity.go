package hostidentity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// A host's database records which catalog owns it (the cluster identity,
// shardid.host_info.cluster_identity) and a secret (shardid.host_secret)
// whose SHA-256 the catalog keeps (host migration 2, catalog migration
// 16). The secret is random and readable by the toolkit's role only: a
// role that forges shardid.host_info in a database of its own cannot
// forge it.

var (
	// ErrSecretMismatch: the database holds no secret, or another than
	// the one whose hash the catalog records for the host.
	ErrSecretMismatch = fmt.Errorf("%w: it does not hold the host's secret", shardmgr.ErrHostUnproven)
	// ErrForeignRecord: the host's record (schema shardid, or anything
	// in it) belongs to a role other than the session's and is not a
	// superuser's, or carries another role's trigger (pgtrust): another
	// role made it.
	ErrForeignRecord = fmt.Errorf("%w: its record belongs to another role", shardmgr.ErrHostUnproven)
)

// SecretSize is the size of a host's secret, in bytes.
const SecretSize = 32

// ReadIdentity returns the cluster identity a host's database records,
// "" when it records none (no record, or one of an older binary).
func ReadIdentity(ctx context.Context, q pg.Querier) (string, error) {
	var id *string
	err := q.QueryRow(ctx, `SELECT cluster_identity::text FROM shardid.host_info`).Scan(&id)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), pg.IsUndefinedTable(err):
		return "", nil
	case errors.As(err, &pe) && (pe.Code == pgerrcode.UndefinedColumn || pe.Code == pgerrcode.InvalidSchemaName):
		return "", nil
	case err != nil:
		return "", err
	case id == nil:
		return "", nil
	}
	return *id, nil
}

// WriteIdentity records identity in a host's record where it records
// none, and returns the identity the record holds afterwards.
func WriteIdentity(ctx context.Context, q pg.Querier, identity string) (string, error) {
	var got string
	err := q.QueryRow(ctx, `UPDATE shardid.host_info SET cluster_identity = coalesce(cluster_identity, $1::uuid)
		RETURNING cluster_identity::text`, identity).Scan(&got)
	return got, err
}

// ReadSecret returns the secret a host's database holds; nil when it
// holds none.
func ReadSecret(ctx context.Context, q pg.Querier) ([]byte, error) {
	var s []byte
	err := q.QueryRow(ctx, `SELECT secret FROM shardid.host_secret`).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err) {
		return nil, nil
	}
	return s, err
}

// NewSecret writes a new random secret to a host's database, replacing
// any, and returns its SHA-256 for the catalog.
func NewSecret(ctx context.Context, q pg.Execer) ([]byte, error) {
	s := make([]byte, SecretSize)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	if _, err := q.Exec(ctx, `INSERT INTO shardid.host_secret (secret) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET secret = EXCLUDED.secret, created_at = now()`, s); err != nil {
		return nil, err
	}
	return Hash(s), nil
}

// Hash is the SHA-256 of a secret, as the catalog records it.
func Hash(secret []byte) []byte {
	h := sha256.Sum256(secret)
	return h[:]
}

// CheckSecret checks that the database behind q is the host's whose
// secret's SHA-256 the catalog records (want): its record and secret
// belong to the session's role or a superuser (ErrForeignRecord), and it
// holds the secret (ErrSecretMismatch).
func CheckSecret(ctx context.Context, q pg.Querier, want []byte) error {
	if err := checkRecordOwners(ctx, q); err != nil {
		return err
	}
	s, err := ReadSecret(ctx, q)
	if err != nil {
		return fmt.Errorf("read its secret: %w", err)
	}
	if s == nil {
		return fmt.Errorf("%w (shardid.host_secret holds none)", ErrSecretMismatch)
	}
	if subtle.ConstantTimeCompare(Hash(s), want) != 1 {
		return fmt.Errorf("%w (shardid.host_secret holds another than the one the catalog recorded)", ErrSecretMismatch)
	}
	return nil
}

// checkRecordOwners refuses a host record whose schema shardid holds
// anything pgtrust does not trust: the schema, a table, function or
// trigger of a role that is neither the session's nor a superuser.
func checkRecordOwners(ctx context.Context, q pg.Querier) error {
	found, err := pgtrust.Findings(ctx, q, []string{migrations.Schema}, nil)
	if err != nil {
		return fmt.Errorf("read its record's owners: %w", err)
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s (%w)", ErrForeignRecord, found[0], pgtrust.ErrUntrusted)
	}
	return nil
}

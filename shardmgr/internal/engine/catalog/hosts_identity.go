package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// The identity columns of the host rows (catalog migration 015) are
// written here, beside the other host writers of hosts.go: by init
// (RecordHostIdentity) and by a failover (FailOverHost, inside a catalog
// change).

// HostIdentity is what the catalog records about the server behind a
// host (migration 015): nil fields were never recorded (a row of an
// older binary, or a server that would not tell).
type HostIdentity struct {
	Name, DSN        string
	SystemIdentifier *string
	Timeline         *int64
	// ClockAheadMS is the most the host's clock was seen ahead of the
	// manager's (0 when never ahead).
	ClockAheadMS *int64
}

const hostIdentityCols = `name, dsn, system_identifier, timeline, clock_ahead_ms`

func scanHostIdentity(r pgx.Row) (HostIdentity, error) {
	var h HostIdentity
	err := r.Scan(&h.Name, &h.DSN, &h.SystemIdentifier, &h.Timeline, &h.ClockAheadMS)
	return h, err
}

// ReadHostIdentity reads host name's recorded identity; lock takes the
// row FOR UPDATE (inside a change).
func ReadHostIdentity(ctx context.Context, q pg.Querier, name string, lock bool) (HostIdentity, error) {
	sql := `SELECT ` + hostIdentityCols + ` FROM shardid.hosts WHERE name = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	h, err := scanHostIdentity(q.QueryRow(ctx, sql, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return h, fmt.Errorf("host %s: %w (not in the catalog)", name, shardmgr.ErrUnknownHost)
	}
	return h, err
}

// ReadHostIdentities reads every host's recorded identity, by name.
func ReadHostIdentities(ctx context.Context, q pg.Querier) (map[string]HostIdentity, error) {
	rows, err := q.Query(ctx, `SELECT `+hostIdentityCols+` FROM shardid.hosts`)
	if err != nil {
		return nil, err
	}
	out := map[string]HostIdentity{}
	for rows.Next() {
		h, err := scanHostIdentity(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out[h.Name] = h
	}
	return out, rows.Err()
}

// RecordHostIdentity records, for init, the identity of the server host
// name reaches: the system identifier and timeline only where none is
// recorded (a recorded one that differs is verify's finding: a failover
// made without `shardid host failover`, which init must not hide), and
// the largest lead of its clock over the manager's seen so far. It
// reports whether the row had no identity before.
func RecordHostIdentity(ctx context.Context, q pg.Execer, name string, id pg.ServerIdentity, clockAhead time.Duration) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE shardid.hosts SET system_identifier = $2, timeline = $3, identified_at = now()
		WHERE name = $1 AND system_identifier IS NULL`, name, id.SystemIdentifier, id.Timeline)
	if err != nil {
		return false, err
	}
	_, err = q.Exec(ctx, `UPDATE shardid.hosts SET clock_ahead_ms = GREATEST(COALESCE(clock_ahead_ms, 0), $2)
		WHERE name = $1 AND clock_ahead_ms IS DISTINCT FROM GREATEST(COALESCE(clock_ahead_ms, 0), $2)`, name, max(clockAhead.Milliseconds(), 0))
	return tag.RowsAffected() > 0, err
}

// FailOverHost records, inside a catalog change, that host name is now
// the server id at catalogDSN (without its password): the promoted
// standby `shardid host failover` checked and whose counters it advanced.
func FailOverHost(ctx context.Context, tx pgx.Tx, name, catalogDSN string, id pg.ServerIdentity, clockAhead time.Duration) error {
	_, err := tx.Exec(ctx, `UPDATE shardid.hosts SET dsn = $2, system_identifier = $3, timeline = $4,
		clock_ahead_ms = $5, identified_at = now() WHERE name = $1`,
		name, catalogDSN, id.SystemIdentifier, id.Timeline, max(clockAhead.Milliseconds(), 0))
	return err
}

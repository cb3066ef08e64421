package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// Describe says how the cluster file's host differs from the catalog's,
// for a message: "host pg4 is not in the catalog".
func (d HostDiff) Describe(cfg *shardmgr.Config) string {
	switch d.Kind {
	case HostAdded:
		return fmt.Sprintf("host %s is not in the catalog", d.Name)
	case HostDSN:
		return fmt.Sprintf("host %s: the catalog records another DSN", d.Name)
	case HostDrain:
		h, _ := cfg.Host(d.Name)
		return fmt.Sprintf("host %s: the file says drain %t, the catalog %t", d.Name, h.Drain, !h.Drain)
	default:
		return fmt.Sprintf("host %s is in the catalog, not in the file", d.Name)
	}
}

// The host rows of the catalog are written here and nowhere else, always
// inside a catalog change (Change, ChangeIf) or the transaction that
// creates the cluster: by init (package install: InsertHost, PutHost,
// RemoveHost), which applies the cluster file's hosts; by the host
// commands (package hosts: SetHostDSN, SetHostDrain, RemoveHost), which
// change one host in the catalog and the cluster file together; and by
// the catalog repair (package repair), which adds the hosts a catalog
// restored from an older backup forgot, inside its change (ChangeAbove).
// The catalog records a host's DSN without its password (Host.CatalogDSN).

// InsertHost records host h, added at generation gen.
func InsertHost(ctx context.Context, tx pgx.Tx, h shardmgr.Host, gen int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO shardid.hosts (name, dsn, drain, added_generation) VALUES ($1, $2, $3, $4)`,
		h.Name, h.CatalogDSN(), h.Drain, gen)
	return err
}

// PutHost records host h: added at generation gen when new, its DSN and
// drain mark updated when they differ.
func PutHost(ctx context.Context, tx pgx.Tx, h shardmgr.Host, gen int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO shardid.hosts (name, dsn, drain, added_generation) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET dsn = EXCLUDED.dsn, drain = EXCLUDED.drain
		WHERE (hosts.dsn, hosts.drain) IS DISTINCT FROM (EXCLUDED.dsn, EXCLUDED.drain)`,
		h.Name, h.CatalogDSN(), h.Drain, gen)
	return err
}

// RemoveHost deletes host name's row; the caller has checked that it
// holds no shard and no unfinished move.
func RemoveHost(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, `DELETE FROM shardid.hosts WHERE name = $1`, name)
	return err
}

// SetHostDSN records dsn (already without its password: Host.CatalogDSN)
// as host name's DSN; shardmgr.ErrUnknownHost when the catalog has no
// such host.
func SetHostDSN(ctx context.Context, tx pgx.Tx, name, dsn string) error {
	return updateHost(ctx, tx, name, `UPDATE shardid.hosts SET dsn = $2 WHERE name = $1`, dsn)
}

// SetHostDrain records host name's drain mark; shardmgr.ErrUnknownHost
// when the catalog has no such host.
func SetHostDrain(ctx context.Context, tx pgx.Tx, name string, drain bool) error {
	return updateHost(ctx, tx, name, `UPDATE shardid.hosts SET drain = $2 WHERE name = $1`, drain)
}

func updateHost(ctx context.Context, tx pgx.Tx, name, sql string, v any) error {
	tag, err := tx.Exec(ctx, sql, name, v)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("host %s: %w (not in the catalog)", name, shardmgr.ErrUnknownHost)
	}
	return nil
}

// HostMove is a move of the journal that still involves a host: unfinished,
// or finished with the retired copy of its shard kept on the source.
type HostMove struct {
	ID       int64
	Shard    int
	From, To string
	Phase    Phase
	// Retained: the move is finished but keeps the shard's retired copy
	// on From (rebalance cleanup drops it).
	Retained bool
}

// HostMoves lists the moves that keep host name in use, by id: those
// unfinished with it as source or target, and those that keep a retired
// copy on it. A host leaves the catalog only when there is none (and it
// holds no shard): init and the host commands ask the same question here.
func HostMoves(ctx context.Context, q pg.Querier, name string) ([]HostMove, error) {
	rows, err := q.Query(ctx, `SELECT id, shard, from_host, to_host, phase, NOT (`+OpenMoves+`)
		FROM shardid.moves
		WHERE $1 IN (from_host, to_host) AND (`+OpenMoves+`
		   OR (from_host = $1 AND retired_schema IS NOT NULL AND retired_dropped_at IS NULL))
		ORDER BY id`, name)
	if err != nil {
		if pg.IsUndefinedTable(err) {
			return nil, nil
		}
		return nil, err
	}
	var m HostMove
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (HostMove, error) {
		err := r.Scan(&m.ID, &m.Shard, &m.From, &m.To, &m.Phase, &m.Retained)
		return m, err
	})
}

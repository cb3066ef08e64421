package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
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

// The host rows of the catalog are written here and nowhere else: by init
// (package install), the one step that applies the cluster file's hosts,
// inside a catalog change (Change, ChangeIf) or the transaction that
// creates the cluster. The catalog records a host's DSN without its
// password (Host.CatalogDSN).

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

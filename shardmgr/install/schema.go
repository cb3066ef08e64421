package install

import (
	"context"
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// SchemaUpgrade is a schema that Init migrated from one version to another.
type SchemaUpgrade struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// checkSchemas reads the schema versions of the catalog and of every
// host's own record before Init writes anything. A database that is
// dirty, or that a newer shardid migrated, is refused with a
// *shardmgr.CatalogVersionError; an older one is what Init upgrades. A
// database that does not exist yet is at version 0.
func checkSchemas(ctx context.Context, c *cluster.Cluster) error {
	cfg := c.Config()
	v, err := readVersion(ctx, c, "", func(ctx context.Context, q shardmgr.Querier) (shardmgr.SchemaVersion, error) {
		return shardmgr.ReadCatalogVersion(ctx, q)
	})
	if err != nil {
		return err
	}
	if err := initAccepts(v); err != nil {
		return err
	}
	for _, h := range cfg.Hosts {
		v, err := readVersion(ctx, c, h.Name, func(ctx context.Context, q shardmgr.Querier) (shardmgr.SchemaVersion, error) {
			return shardmgr.ReadHostVersion(ctx, q, h.Name)
		})
		if err != nil {
			return pg.OnHost(h.Name, err)
		}
		if err := initAccepts(v); err != nil {
			return err
		}
	}
	return nil
}

// initAccepts is v.Check for a writer that upgrades what is older.
func initAccepts(v shardmgr.SchemaVersion) error {
	err := v.Check(shardmgr.UseWrite)
	if errors.Is(err, shardmgr.ErrCatalogTooOld) {
		return nil
	}
	return err
}

// readVersion reads a schema version on the catalog (host "") or a host.
func readVersion(ctx context.Context, c *cluster.Cluster, host string, read func(context.Context, shardmgr.Querier) (shardmgr.SchemaVersion, error)) (shardmgr.SchemaVersion, error) {
	conn, err := acquire(ctx, c, host) // with a connect timeout
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == pgerrcode.InvalidCatalogName {
			return shardmgr.SchemaVersion{}, nil // Init creates it
		}
		return shardmgr.SchemaVersion{}, err
	}
	defer conn.Release()
	return read(ctx, conn)
}

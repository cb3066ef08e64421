package install

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// checkTrust refuses, before Init reads or writes anything, a catalog or
// host database whose shardid schema another role made or put anything
// in, and a host database holding a shard schema (of the names Init
// gives shards) that another role made: Init writes those as the
// toolkit's role (often a superuser), so a trigger there would run as it,
// and a shard schema's owner can replace its counter. The errors wrap
// pgtrust.ErrUntrusted and name the object, its owner and the fix. A
// database that does not exist yet passes (Init creates it).
func checkTrust(ctx context.Context, c *cluster.Cluster) error {
	cfg := c.Config()
	schemas := make([]string, cfg.Shards)
	for i := range schemas {
		schemas[i] = shsql.DefaultSchema(i)
	}
	check := func(host string) error {
		conn, err := acquire(ctx, c, host)
		if err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == pgerrcode.InvalidCatalogName {
				return nil
			}
			return err
		}
		defer conn.Release()
		if err := pgtrust.Check(ctx, conn, migrations.Schema); err != nil {
			return err
		}
		if host == "" {
			return nil
		}
		return shardschema.CheckTrusted(ctx, conn, schemas...)
	}
	if err := check(""); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	for _, h := range cfg.Hosts {
		if err := check(h.Name); err != nil {
			return pg.OnHost(h.Name, err)
		}
	}
	return nil
}

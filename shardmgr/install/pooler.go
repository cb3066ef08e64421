package install

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// poolerProbeTimeout bounds the probe of one DSN for a connection pooler.
const poolerProbeTimeout = 10 * time.Second

// refusePoolers refuses, before init creates or records anything, a
// catalog or host DSN that reaches a connection pooler instead of
// PostgreSQL (pg.RefusePooler): the catalog would record it, and every
// operator command after would break on it. A DSN that does not answer is
// left to the steps that connect.
func refusePoolers(ctx context.Context, c *cluster.Cluster) error {
	cfg := c.Config()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	g.Go(func() error {
		if err := pg.RefusePooler(gctx, cfg.Catalog, poolerProbeTimeout); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		return nil
	})
	for _, h := range cfg.Hosts {
		g.Go(func() error {
			if err := pg.RefusePooler(gctx, h.DSN, poolerProbeTimeout); err != nil {
				return fmt.Errorf("host %s: dsn: %w", h.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

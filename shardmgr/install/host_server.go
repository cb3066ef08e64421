package install

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// recordServerIdentities records in the catalog which server each host
// reaches (system identifier, timeline) where nothing is recorded yet,
// and how far its clock leads the manager's: what `shardid host failover`
// checks a promoted standby against, and what verify compares with the
// server it finds (docs/uniqueness.md#failover). A server that will not
// tell (pg_control_system() revoked) is a warning, not a failure: the
// host works, it cannot be failed over by the command until it tells.
func recordServerIdentities(ctx context.Context, c *cluster.Cluster, catalogPool *pgxpool.Pool) (warnings []string, err error) {
	for _, h := range c.Config().Hosts {
		pool, err := c.HostPool(ctx, h.Name, cluster.Session{})
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		id, err := pg.ReadServerIdentity(ctx, pool)
		if errors.Is(err, pg.ErrIdentityDenied) {
			warnings = append(warnings, fmt.Sprintf("host %s: %v: its identity is not recorded, so `shardid host failover` cannot check a promoted standby of it", h.Name, err))
			continue
		}
		if err != nil {
			return nil, pg.OnHost(h.Name, err)
		}
		rec, err := catalog.ReadHostIdentity(ctx, catalogPool, h.Name, false)
		if err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		if rec.SystemIdentifier != nil && *rec.SystemIdentifier == id.SystemIdentifier && rec.Timeline != nil && id.Timeline > *rec.Timeline {
			warnings = append(warnings, fmt.Sprintf("host %s: its server is on timeline %d, the catalog recorded %d: a standby promoted without `shardid host failover`, whose counters may repeat ids the old primary never replicated (docs/operations.md#failover)",
				h.Name, id.Timeline, *rec.Timeline))
		}
		ahead := pg.ClockAhead(t0, id.Now)
		if _, err := catalog.RecordHostIdentity(ctx, catalogPool, h.Name, id, ahead); err != nil {
			return nil, fmt.Errorf("catalog: host %s: record its identity: %w", h.Name, err)
		}
	}
	return warnings, nil
}

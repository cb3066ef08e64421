package install

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
)

// checkNotStale refuses a catalog older than the hosts' own records (one
// restored from an older backup): init would re-apply its map, installing
// shards again on hosts whose copies were retired, beside their live
// copies elsewhere. Hosts that cannot be read or hold no record yet are
// not judged here (init reports them itself); a catalog with no cluster
// yet has nothing to compare.
func checkNotStale(ctx context.Context, c *cluster.Cluster, catalog *pgxpool.Pool) error {
	m, err := shardmgr.ReadMap(ctx, catalog)
	if errors.Is(err, shardmgr.ErrNotInitialized) {
		return nil
	}
	if err != nil {
		return err
	}
	recs := hostidentity.Records(hostidentity.Read(ctx, c), m.Cluster)
	if e := shardmgr.CompareHostRecords(m, recs); e != nil {
		return fmt.Errorf("init: %w", e)
	}
	return nil
}

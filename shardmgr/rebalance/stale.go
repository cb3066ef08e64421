package rebalance

import (
	"context"
	"fmt"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
)

// refuseStaleCatalog refuses a catalog older than the hosts' own records
// (restored from an older backup, shardmgr.ErrCatalogStale): a move,
// abort or cleanup run by its map and journal would copy from, give back
// or drop copies the hosts have moved on from. Hosts that cannot be read
// are not judged here (the move's own steps reach them).
func (mo *mover) refuseStaleCatalog(ctx context.Context) error {
	recs := hostidentity.Records(hostidentity.Read(ctx, mo.c), mo.m.Cluster)
	if e := shardmgr.CompareHostRecords(mo.m, recs); e != nil {
		return fmt.Errorf("moves: %w", e)
	}
	return nil
}

package hosts

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/catalog"
	"github.com/shardid/shardid/shardmgr/internal/pg"
)

// checkNewServer refuses, for Failover with NewServer, a server that is
// not the host's database restored onto another server: it must be out
// of recovery, have a system identifier other than the recorded one (the
// recorded server and its standbys take the plain failover, whose checks
// are stronger), and its database must record itself as this host of
// this cluster. The server at the host's old DSN (oldDSN, the cluster
// file's) must not answer, or be in recovery, or be the new server
// itself (the old address reused): a primary there would hand out ids
// beside the new one. Only the system identifier and timeline checks of
// checkPromotedStandby are skipped; the counters are advanced the same
// way, which covers a restored copy too (docs/uniqueness.md#failover).
func checkNewServer(ctx context.Context, conn *pgx.Conn, clusterName, name string, rec catalog.HostIdentity, id pg.ServerIdentity, oldDSN string) error {
	if id.InRecovery {
		return fmt.Errorf("%w: it is a standby, in recovery", ErrNotPromoted)
	}
	if id.SystemIdentifier == *rec.SystemIdentifier {
		return fmt.Errorf("%w: %s: the host's server or a standby of it, not another server", ErrSameServer, id.SystemIdentifier)
	}
	if err := checkHostRecord(ctx, conn, clusterName, name); err != nil {
		return err
	}
	oldConn, err := connect(ctx, oldDSN, DefaultProbeTimeout)
	if err != nil {
		return nil // the old server is gone
	}
	defer oldConn.Close(context.WithoutCancel(ctx))
	pctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	var inRecovery bool
	if err := oldConn.QueryRow(pctx, `SELECT pg_catalog.pg_is_in_recovery()`).Scan(&inRecovery); err != nil {
		return fmt.Errorf("the old DSN answers, but: %w", err)
	}
	if inRecovery {
		return nil
	}
	same, err := sameDatabase(pctx, oldConn, conn)
	if err != nil {
		return fmt.Errorf("compare the old and the new server: %w", err)
	}
	if !same {
		return fmt.Errorf("%w: the server at the host's old DSN answers as a primary, beside the new one", ErrOldServerWritable)
	}
	return nil
}

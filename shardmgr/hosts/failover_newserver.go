package hosts

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// checkNewServer refuses, for Failover with NewServer, a server that is
// not the host's database restored onto another server: it must be out
// of recovery, have a system identifier other than the recorded one (the
// recorded server and its standbys take the plain failover, whose checks
// are stronger), and its database must record itself as this host of
// this cluster. The old server must be stopped, as for every failover
// (checkOldStopped). Only the system identifier and timeline checks of
// checkPromotedStandby are skipped; the counters are advanced the same
// way, which covers a restored copy too (docs/uniqueness.md#failover).
func checkNewServer(ctx context.Context, conn *pgx.Conn, clusterName, name string, rec catalog.HostIdentity, id pg.ServerIdentity) error {
	if id.InRecovery {
		return fmt.Errorf("%w: it is a standby, in recovery", ErrNotPromoted)
	}
	if id.SystemIdentifier == *rec.SystemIdentifier {
		return fmt.Errorf("%w: %s: the host's server or a standby of it, not another server", ErrSameServer, id.SystemIdentifier)
	}
	return checkHostRecord(ctx, conn, clusterName, name)
}

// checkOldStopped refuses a failover while the server at the host's old
// DSN (oldDSN, the cluster file's) still answers as a primary (not in
// recovery), unless it is the new server itself (the old address now
// reaches it: a moved virtual address, a multi-host DSN): two primaries of
// one host would take writes and hand out the same ids. The command
// cannot stop it; the operator must.
func checkOldStopped(ctx context.Context, conn *pgx.Conn, oldDSN string) error {
	oldConn, err := connect(ctx, oldDSN, DefaultProbeTimeout)
	if err != nil {
		return nil // the old server is gone
	}
	defer oldConn.Close(context.WithoutCancel(ctx))
	pctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	var inRecovery bool
	var addr string
	if err := oldConn.QueryRow(pctx, `SELECT pg_catalog.pg_is_in_recovery(),
			coalesce(pg_catalog.host(pg_catalog.inet_server_addr()) || ':' || pg_catalog.inet_server_port(), 'local socket')`).Scan(&inRecovery, &addr); err != nil {
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
		return fmt.Errorf("%w: the server at the host's old DSN (%s) still answers as a primary (not in recovery), beside the new one: stop it (or make it a standby) first", ErrOldServerWritable, addr)
	}
	return nil
}

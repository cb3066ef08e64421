package install

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// checkHostsDistinct refuses a cluster file whose hosts reach one database
// under two names (127.0.0.1 and localhost, 127.1, [::ffff:127.0.0.1], a
// unix socket, a pooler in front): the DSNs differ, so only the servers
// can tell. It asks each host's server when it started
// (pg_postmaster_start_time, to the microsecond) and its database's oid:
// two names for one database give the same pair; servers cloned from one
// another (same system identifier, same database oids) started at
// different moments and are told apart. Each host is asked on a
// connection of its own, one at a time from the handle's budget (an
// earlier probe held one connection per host at once, which a budget
// smaller than the hosts on a server could never grant). Nothing is
// written.
//
// It returns an error wrapping ErrConfig that names both hosts of every
// such pair.
func checkHostsDistinct(ctx context.Context, c *cluster.Cluster) error {
	cfg := c.Config()
	if len(cfg.Hosts) < 2 {
		return nil
	}
	type identity struct {
		started time.Time
		oid     uint32
	}
	ids := make([]identity, len(cfg.Hosts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, h := range cfg.Hosts {
		g.Go(func() error {
			conn, err := acquire(gctx, c, h.Name)
			if err != nil {
				return pg.OnHost(h.Name, err)
			}
			defer conn.Release()
			if err := conn.QueryRow(gctx, `SELECT pg_catalog.pg_postmaster_start_time(), d.oid
				FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()`).Scan(&ids[i].started, &ids[i].oid); err != nil {
				return fmt.Errorf("host %s: identify its database: %w", h.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var probs []string
	for i := range cfg.Hosts {
		for j := i + 1; j < len(cfg.Hosts); j++ {
			if ids[i].oid == ids[j].oid && ids[i].started.Equal(ids[j].started) {
				ki, _ := pg.DatabaseKey(cfg.Hosts[i].DSN)
				kj, _ := pg.DatabaseKey(cfg.Hosts[j].DSN)
				probs = append(probs, fmt.Sprintf("hosts %s (%s) and %s (%s) are one database: the same server (started %s) and database (oid %d)",
					cfg.Hosts[i].Name, ki, cfg.Hosts[j].Name, kj, ids[i].started.UTC().Format(time.RFC3339Nano), ids[i].oid))
			}
		}
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: %s (give each host a database of its own)", shardmgr.ErrConfig, cfg.Path, strings.Join(probs, "; "))
}

// readHostInfo returns the cluster and host name a database records
// about itself, or "" when it records nothing.
func readHostInfo(ctx context.Context, conn *pgx.Conn) (cluster, name string, err error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass('shardid.host_info') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return "", "", err
	}
	err = conn.QueryRow(ctx, `SELECT cluster, host FROM shardid.host_info`).Scan(&cluster, &name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	return cluster, name, err
}

// acquire takes a connection from the handle's pool on the catalog (host
// "") or on a host: the handle holds every connection init makes, so a
// database is connected to once for all of init's checks and work.
func acquire(ctx context.Context, c *cluster.Cluster, host string) (*pgxpool.Conn, error) {
	var (
		p   *pgxpool.Pool
		err error
	)
	if host == "" {
		p, err = c.CatalogPool(ctx)
	} else {
		p, err = c.HostPool(ctx, host, cluster.Session{})
	}
	if err != nil {
		return nil, err
	}
	return p.Acquire(ctx)
}

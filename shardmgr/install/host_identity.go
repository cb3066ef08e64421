package install

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/pg"
)

// checkHostsDistinct refuses a cluster file whose hosts reach one database
// under two names (127.0.0.1 and localhost, 127.1, [::ffff:127.0.0.1], a
// unix socket, a pooler in front): the DSNs differ, so only the servers
// can tell. It asks them: each host's connection takes a transaction
// advisory lock carrying its index, and each connection then lists the
// locks that PostgreSQL shows in its own database. Two hosts that see each
// other's lock in the same database are one database; servers cloned from
// one another (same system identifier, same database oids) are not, since
// they share no locks. Nothing is written; the locks go with the
// transactions.
//
// It returns an error wrapping ErrConfig that names both hosts of every
// such pair.
func checkHostsDistinct(ctx context.Context, c *cluster.Cluster) error {
	cfg := c.Config()
	if len(cfg.Hosts) < 2 {
		return nil
	}
	// A random first key (below the 'shid' classes shardid uses for its
	// own locks), so that two managers checking at once, or anyone
	// else's advisory locks, are not taken for ours.
	class := int32(rand.N(1<<30)) + 1
	txs := make([]pgx.Tx, len(cfg.Hosts))
	conns := make([]*pgxpool.Conn, len(cfg.Hosts))
	defer func() {
		for i, tx := range txs {
			if tx != nil {
				tx.Rollback(context.WithoutCancel(ctx))
			}
			if conns[i] != nil {
				conns[i].Release()
			}
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	for i, h := range cfg.Hosts {
		g.Go(func() error {
			conn, err := acquire(gctx, c, h.Name)
			if err != nil {
				return fmt.Errorf("host %s: %w", h.Name, err)
			}
			conns[i] = conn
			tx, err := conn.Begin(gctx)
			if err != nil {
				return fmt.Errorf("host %s: %w", h.Name, err)
			}
			txs[i] = tx
			var ok bool
			if err := tx.QueryRow(gctx, `SELECT pg_catalog.pg_try_advisory_xact_lock($1, $2)`, class, int32(i)).Scan(&ok); err != nil {
				return fmt.Errorf("host %s: %w", h.Name, err)
			}
			if !ok {
				return fmt.Errorf("host %s: identify its database: the probe's lock is taken (run init again)", h.Name)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	same := map[[2]int]bool{}
	for j, tx := range txs {
		rows, err := tx.Query(ctx, `SELECT l.objid::int FROM pg_catalog.pg_locks l
			WHERE l.locktype = 'advisory' AND l.classid = $1::oid AND l.objsubid = 2 AND l.granted
			  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())`, int64(class))
		if err != nil {
			return fmt.Errorf("host %s: %w", cfg.Hosts[j].Name, err)
		}
		seen, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("host %s: %w", cfg.Hosts[j].Name, err)
		}
		for _, i := range seen {
			if i != j && i >= 0 && i < len(cfg.Hosts) {
				same[[2]int{min(i, j), max(i, j)}] = true
			}
		}
	}
	if len(same) == 0 {
		return nil
	}
	var probs []string
	for i := range cfg.Hosts {
		for j := i + 1; j < len(cfg.Hosts); j++ {
			if same[[2]int{i, j}] {
				ki, _ := pg.DatabaseKey(cfg.Hosts[i].DSN)
				kj, _ := pg.DatabaseKey(cfg.Hosts[j].DSN)
				probs = append(probs, fmt.Sprintf("hosts %s (%s) and %s (%s) are one database: the server shows both connections in it",
					cfg.Hosts[i].Name, ki, cfg.Hosts[j].Name, kj))
			}
		}
	}
	return fmt.Errorf("%w: %s: %s (give each host a database of its own)", shardmgr.ErrConfig, cfg.Path, strings.Join(probs, "; "))
}

// checkHostRecords reads each host's own record (shardid.host_info),
// where there is one, and refuses a database that belongs to another
// cluster or is recorded as another host: Init checks this before it
// records anything in the catalog.
func checkHostRecords(ctx context.Context, c *cluster.Cluster) error {
	cfg := c.Config()
	var probs []string
	for _, h := range cfg.Hosts {
		conn, err := acquire(ctx, c, h.Name)
		if err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
		cluster, name, err := readHostInfo(ctx, conn.Conn())
		conn.Release()
		if err != nil {
			return fmt.Errorf("host %s: read its record: %w", h.Name, err)
		}
		if cluster == "" {
			continue // not a shardid host yet
		}
		if cluster != cfg.Cluster || name != h.Name {
			probs = append(probs, fmt.Sprintf("host %s: its database belongs to cluster %q as host %q", h.Name, cluster, name))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", shardmgr.ErrClusterMismatch, strings.Join(probs, "; "))
	}
	return nil
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

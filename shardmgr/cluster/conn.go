package cluster

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// The handle's single connections: a session lock held for a whole run,
// a replication connection, a COPY's source and target, golang-migrate's
// session. They draw on the same budget as the pools: a connection made
// from one of these configs takes a place in its server's budget when it
// dials and gives it back when it closes. Close every connection made.

// CatalogConnConfig is a connection config of session kind s on the
// catalog whose connections draw on the budget. The caller may change
// the database (to the server's postgres database, say) or the runtime
// parameters (replication=database); the server must stay.
func (c *Cluster) CatalogConnConfig(s Session) (*pgx.ConnConfig, error) {
	cfg, err := c.connConfig(c.cfg.Catalog, s)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return cfg, nil
}

// HostConnConfig is CatalogConnConfig for host name of the cluster file.
func (c *Cluster) HostConnConfig(name string, s Session) (*pgx.ConnConfig, error) {
	h, ok := c.cfg.Host(name)
	if !ok {
		return nil, fmt.Errorf("host %s: %w (not in the cluster file %s)", name, shardmgr.ErrUnknownHost, c.cfg.Path)
	}
	cfg, err := c.connConfig(h.DSN, s)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	return cfg, nil
}

// CatalogConn is one connection of session kind s on the catalog, within
// the budget; closing it gives its place back.
func (c *Cluster) CatalogConn(ctx context.Context, s Session) (*pgx.Conn, error) {
	cfg, err := c.CatalogConnConfig(s)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, pg.ServerFirst(fmt.Errorf("catalog: %w", err))
	}
	return conn, nil
}

// HostConn is CatalogConn for host name of the cluster file.
func (c *Cluster) HostConn(ctx context.Context, name string, s Session) (*pgx.Conn, error) {
	cfg, err := c.HostConnConfig(name, s)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, pg.ServerFirst(fmt.Errorf("host %s: %w", name, err))
	}
	return conn, nil
}

// Reserve takes, all at once, a place in the budget for each config
// (made by CatalogConnConfig or HostConnConfig), for work that needs
// those connections together: taken one by one, works that each hold one
// could wait for the other forever. Connections made with the returned
// context use the places reserved first; release gives back those not
// used (call it once they are made).
func (c *Cluster) Reserve(ctx context.Context, cfgs ...*pgx.ConnConfig) (context.Context, func(), error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	need := map[string]int{}
	for _, cfg := range cfgs {
		need[serverOf(&cfg.Config)]++
	}
	if err := c.budget.take(ctx, need); err != nil {
		return nil, nil, err
	}
	r := &reservation{b: c.budget, left: need}
	return context.WithValue(ctx, reservationKey{}, r), r.release, nil
}

// connConfig parses dsn into a config of session kind s on the budget.
func (c *Cluster) connConfig(dsn string, s Session) (*pgx.ConnConfig, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	cfg, err := pgsession.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot parse DSN: %w", err)
	}
	c.session(cfg, s)
	return cfg, nil
}

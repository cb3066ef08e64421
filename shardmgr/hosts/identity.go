package hosts

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/hostrecords"
	"github.com/shardid/shardid/shardmgr/internal/pg"
)

// Server is what a host's server says about itself.
type Server struct {
	// SystemID is the server's system identifier (pg_control_system()),
	// the same on a primary and the standbys copied from it; "" where
	// the role may not read it.
	SystemID string `json:"system_identifier"`
	// Timeline is the WAL timeline it writes on (a standby: the one it
	// last replayed a checkpoint of); a promotion starts a newer one. 0
	// where the role may not read it.
	Timeline int64  `json:"timeline"`
	Version  string `json:"version"`
	// Address is the address and port the connection reached
	// (inet_server_addr, inet_server_port): with a DSN naming several
	// servers, the one that answered.
	Address  string `json:"address"`
	Database string `json:"database"`
	// Role is "primary" or "standby" (pg_is_in_recovery()).
	Role string `json:"role"`
	// Cluster and Host are what the database records about itself
	// (shardid.host_info); "" when it records nothing.
	Cluster string `json:"cluster"`
	Host    string `json:"host"`
	// Standbys are a primary's streaming standbys (pg_stat_replication;
	// their lag is null where the role may not read it).
	Standbys []Standby `json:"standbys,omitempty"`
	// ReplayLagMS is a standby's lag: now() less the time of the last
	// transaction it replayed; null on a primary or before any replay.
	ReplayLagMS *float64 `json:"replay_lag_ms"`
}

// Standby is one standby streaming from a primary.
type Standby struct {
	Name    string   `json:"name"`
	Address string   `json:"address"`
	State   string   `json:"state"`
	LagMS   *float64 `json:"replay_lag_ms"`
}

// Role values.
const (
	RolePrimary = "primary"
	RoleStandby = "standby"
)

// identify asks the server behind q who it is: its identity as
// pg.ReadServerIdentity reads it (the one reader, which init, failover and
// verify use too), then where it runs and what its database records. A
// question refused after the first returns what was learned with the
// error; a role that may not read the identity leaves SystemID "" and
// Timeline 0.
func identify(ctx context.Context, q pg.Querier) (*Server, error) {
	s := &Server{}
	var port int
	var inRecovery bool
	err := q.QueryRow(ctx, `SELECT pg_catalog.current_database(), pg_catalog.current_setting('server_version'),
			coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'local socket'), coalesce(pg_catalog.inet_server_port(), 0),
			pg_catalog.pg_is_in_recovery()`).Scan(&s.Database, &s.Version, &s.Address, &port, &inRecovery)
	if err != nil {
		return nil, err
	}
	if port != 0 {
		s.Address += ":" + strconv.Itoa(port)
	}
	switch id, err := pg.ReadServerIdentity(ctx, q); {
	case err == nil:
		s.SystemID, s.Timeline, inRecovery = id.SystemIdentifier, id.Timeline, id.InRecovery
	case !errors.Is(err, pg.ErrIdentityDenied):
		return s, err
	}
	s.Role = RolePrimary
	if inRecovery {
		s.Role = RoleStandby
	}
	if s.Cluster, s.Host, err = hostrecords.ReadInfo(ctx, q); err != nil {
		return s, fmt.Errorf("read its record (shardid.host_info): %w", err)
	}
	if inRecovery {
		err = q.QueryRow(ctx, `SELECT extract(epoch FROM pg_catalog.now() - pg_catalog.pg_last_xact_replay_timestamp()) * 1000`).Scan(&s.ReplayLagMS)
		return s, err
	}
	rows, err := q.Query(ctx, `SELECT coalesce(application_name, ''), coalesce(pg_catalog.host(client_addr), ''), coalesce(state, ''),
			extract(epoch FROM replay_lag) * 1000
		FROM pg_catalog.pg_stat_replication ORDER BY application_name, client_addr`)
	if err != nil {
		return s, err
	}
	s.Standbys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Standby, error) {
		var sb Standby
		return sb, r.Scan(&sb.Name, &sb.Address, &sb.State, &sb.LagMS)
	})
	return s, err
}

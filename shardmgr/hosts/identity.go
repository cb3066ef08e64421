package hosts

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
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
	// Standbys are a primary's physical standbys (pg_stat_replication;
	// their lag is null where the role may not read it). The logical
	// replication of a move is not a standby: it is in Moves.
	Standbys []Standby `json:"standbys,omitempty"`
	// Moves are the online moves this server sends as their source: the
	// shardid replication slots in its database, each with the open moves
	// of the catalog it carries (a batch carries several).
	Moves []MoveReplication `json:"moves,omitempty"`
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

// MoveReplication is one open move's logical replication, seen on its
// source. JSON: {"id":N,"shard":N,"to":"pg3","slot":"shardid_m...",
// "state":"streaming","lag_bytes":N,"replay_lag_ms":N}.
type MoveReplication struct {
	// ID, Shard and To are the move's, from the catalog's journal; ID 0
	// is a shardid slot no open move of the catalog names.
	ID    int64  `json:"id"`
	Shard int    `json:"shard"`
	To    string `json:"to"`
	// Slot is the replication slot (and publication) of the move's batch.
	Slot string `json:"slot"`
	// State is its walsender's state; "" while the target is not
	// connected.
	State string `json:"state"`
	// LagBytes is the WAL the source wrote since what the target
	// confirmed; null before it confirmed anything.
	LagBytes *int64 `json:"lag_bytes"`
	// LagMS is the walsender's replay lag; null when it cannot be read.
	LagMS *float64 `json:"replay_lag_ms"`

	marks []string // the batch's mark tables: its moves' replication names
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
	if s.Cluster, s.Host, err = hostidentity.ReadInfo(ctx, q); err != nil {
		return s, fmt.Errorf("read its record (shardid.host_info): %w", err)
	}
	if inRecovery {
		err = q.QueryRow(ctx, `SELECT extract(epoch FROM pg_catalog.now() - pg_catalog.pg_last_xact_replay_timestamp()) * 1000`).Scan(&s.ReplayLagMS)
		return s, err
	}
	// Physical standbys only: a logical walsender (a move's subscription,
	// its table sync) holds a logical slot and is connected to a database.
	rows, err := q.Query(ctx, `SELECT coalesce(r.application_name, ''), coalesce(pg_catalog.host(r.client_addr), ''), coalesce(r.state, ''),
			extract(epoch FROM r.replay_lag) * 1000
		FROM pg_catalog.pg_stat_replication r
		WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')
		  AND NOT EXISTS (SELECT FROM pg_catalog.pg_stat_activity a WHERE a.pid = r.pid AND a.datid IS NOT NULL)
		ORDER BY 1, 2`)
	if err != nil {
		return s, err
	}
	s.Standbys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Standby, error) {
		var sb Standby
		return sb, r.Scan(&sb.Name, &sb.Address, &sb.State, &sb.LagMS)
	})
	if err != nil {
		return s, err
	}
	s.Moves, err = readMoveSlots(ctx, q)
	return s, err
}

// readMoveSlots reads the moves' replication slots of the database q is
// connected to (shardid_m*, named after the move that opened the batch),
// each with the mark tables its publication carries: one per move.
func readMoveSlots(ctx context.Context, q pg.Querier) ([]MoveReplication, error) {
	rows, err := q.Query(ctx, `SELECT s.slot_name::text, coalesce(r.state, ''),
			(pg_catalog.pg_current_wal_lsn() - s.confirmed_flush_lsn)::bigint, extract(epoch FROM r.replay_lag) * 1000,
			coalesce((SELECT pg_catalog.array_agg(pt.tablename::text ORDER BY pt.tablename) FROM pg_catalog.pg_publication_tables pt
				WHERE pt.pubname = s.slot_name AND pt.schemaname = 'shardid'), '{}')
		FROM pg_catalog.pg_replication_slots s LEFT JOIN pg_catalog.pg_stat_replication r ON r.pid = s.active_pid
		WHERE s.slot_type = 'logical' AND s.database = pg_catalog.current_database() AND s.slot_name LIKE 'shardid\_m%'
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("read the moves' replication slots: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (MoveReplication, error) {
		var m MoveReplication
		return m, r.Scan(&m.Slot, &m.State, &m.LagBytes, &m.LagMS, &m.marks)
	})
	if err != nil {
		return nil, fmt.Errorf("read the moves' replication slots: %w", err)
	}
	return out, nil
}

// checkSecret refuses a database (behind conn) that does not prove it is
// host name's: its record must belong to the toolkit's role (the
// session's) or a superuser, and it must hold the host's secret, whose
// hash the catalog (cat) records (init writes both). A role that forges
// shardid.host_info in a database of its own, with the right cluster and
// host name, fails both. A host whose secret the catalog has not
// recorded is ErrNotIdentified (init records it).
func checkSecret(ctx context.Context, cat, conn pg.Querier, name string) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	want, err := catalog.ReadHostSecretHash(ctx, cat, name)
	if err != nil {
		return fmt.Errorf("catalog: read the host's secret's hash: %w", err)
	}
	if want == nil {
		return fmt.Errorf("%w: the catalog records no secret for the host", ErrNotIdentified)
	}
	return hostidentity.CheckSecret(ctx, conn, want)
}

package install

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// Status is the map as `shardid status --json` prints it:
//
//	{"generation":N,"hosts":[{"name":"pg1","shards":[0,1,...]}],
//	 "shards":[{"id":0,"schema":"shard_0000","host":"pg1","state":"active"}],
//	 "moves":[{"id":N,"shard":5,"from":"pg3","to":"pg4","mode":"online","phase":"copy",...}]}
type Status struct {
	Generation int64         `json:"generation"`
	Hosts      []HostStatus  `json:"hosts"`
	Shards     []ShardStatus `json:"shards"`
	// Moves are the moves in progress (the journal's open moves, oldest
	// first): planned, running, or stopped by an error until apply
	// resumes them or abort rolls them back.
	Moves []MoveStatus `json:"moves"`
}

// HostStatus lists the shards one host holds.
type HostStatus struct {
	Name   string `json:"name"`
	Shards []int  `json:"shards"`
	// Unreachable is why the host did not answer a query (within 5 s),
	// "" when it did.
	Unreachable string `json:"unreachable,omitempty"`
}

// ShardStatus is one logical shard's host and state.
type ShardStatus struct {
	ID     int            `json:"id"`
	Schema string         `json:"schema"`
	Host   string         `json:"host"`
	State  shardmgr.State `json:"state"`
}

// MoveStatus is a move in progress as the journal records it; package
// rebalance has the full record (rebalance.Moves).
type MoveStatus struct {
	ID    int64  `json:"id"`
	Shard int    `json:"shard"`
	From  string `json:"from"`
	To    string `json:"to"`
	Mode  string `json:"mode"`
	Phase string `json:"phase"`
	// Bytes is the shard's size when planned, Rows the rows copied so far.
	Bytes   int64     `json:"bytes"`
	Rows    int64     `json:"rows"`
	Started time.Time `json:"started"`
	// Error is why the move stopped, "" while it runs.
	Error string `json:"error,omitempty"`
}

// statusOf renders a map as a Status.
func statusOf(m *shardmgr.ShardMap) *Status {
	st := &Status{Generation: m.Generation, Hosts: []HostStatus{}, Shards: make([]ShardStatus, len(m.Shards)), Moves: []MoveStatus{}}
	for _, h := range m.Hosts {
		st.Hosts = append(st.Hosts, HostStatus{Name: h.Name, Shards: m.ShardsOn(h.Name)})
	}
	for i, s := range m.Shards {
		st.Shards[i] = ShardStatus{ID: s.ID, Schema: s.Schema, Host: s.Host, State: s.State}
	}
	return st
}

// ClusterStatus reads the map and the moves in progress from the catalog,
// and asks each host whether it answers (HostStatus.Unreachable).
func ClusterStatus(ctx context.Context, c *cluster.Cluster) (*Status, error) {
	st, err := readStatus(ctx, c)
	if err != nil {
		return nil, err
	}
	probeHosts(ctx, c, st)
	return st, nil
}

// readStatus reads the map and the moves in progress from the catalog.
func readStatus(ctx context.Context, c *cluster.Cluster) (*Status, error) {
	pool, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	m, err := shardmgr.ReadMap(ctx, pool)
	if err != nil {
		if errors.Is(err, shardmgr.ErrNotInitialized) {
			return nil, err
		}
		return nil, fmt.Errorf("catalog: %w", err)
	}
	st := statusOf(m)
	if st.Moves, err = openMoves(ctx, pool); err != nil {
		return nil, err
	}
	return st, nil
}

// openMoves reads the journal's open moves, oldest first.
func openMoves(ctx context.Context, q shardmgr.Querier) ([]MoveStatus, error) {
	rows, err := q.Query(ctx, `SELECT id, shard, from_host, to_host, mode, phase, bytes, rows_copied, created_at, error
		FROM shardid.moves WHERE `+catalog.OpenMoves+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("catalog: read move journal: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MoveStatus, error) {
		var mv MoveStatus
		err := row.Scan(&mv.ID, &mv.Shard, &mv.From, &mv.To, &mv.Mode, &mv.Phase, &mv.Bytes, &mv.Rows, &mv.Started, &mv.Error)
		return mv, err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: read move journal: %w", err)
	}
	return out, nil
}

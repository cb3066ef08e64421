package install

import (
	"context"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/catalog"
)

// Status is the map as `shardid status --json` prints it:
//
//	{"generation":N,"hosts":[{"name":"pg1","shards":[0,1,...]}],
//	 "shards":[{"id":0,"schema":"shard_0000","host":"pg1","state":"active"}]}
type Status struct {
	Generation int64         `json:"generation"`
	Hosts      []HostStatus  `json:"hosts"`
	Shards     []ShardStatus `json:"shards"`
}

// HostStatus lists the shards one host holds.
type HostStatus struct {
	Name   string `json:"name"`
	Shards []int  `json:"shards"`
}

// ShardStatus is one logical shard's host and state.
type ShardStatus struct {
	ID     int            `json:"id"`
	Schema string         `json:"schema"`
	Host   string         `json:"host"`
	State  shardmgr.State `json:"state"`
}

// statusOf renders a map as a Status.
func statusOf(m *shardmgr.ShardMap) *Status {
	st := &Status{Generation: m.Generation, Hosts: []HostStatus{}, Shards: make([]ShardStatus, len(m.Shards))}
	for _, h := range m.Hosts {
		st.Hosts = append(st.Hosts, HostStatus{Name: h.Name, Shards: m.ShardsOn(h.Name)})
	}
	for i, s := range m.Shards {
		st.Shards[i] = ShardStatus{ID: s.ID, Schema: s.Schema, Host: s.Host, State: s.State}
	}
	return st
}

// ClusterStatus reads the map from the catalog named in cfg.
func ClusterStatus(ctx context.Context, cfg *shardmgr.Config) (*Status, error) {
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	m, err := catalog.ReadClusterMap(ctx, cfg, shardmgr.UseRead)
	if err != nil {
		return nil, err
	}
	return statusOf(m), nil
}

package install

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// ShardLocation is where one logical shard lives, as `shardid shard where
// N --json` prints it:
//
//	{"shard":5,"schema":"shard_0005","host":"pg1","dsn":"postgres://postgres@127.0.0.1:5433/app",
//	 "state":"active","generation":N}
//
// DSN is the host's as the cluster file writes it, ${VAR} references kept
// and any password left out; MovingTo names the target of a move in
// progress.
type ShardLocation struct {
	Shard      int            `json:"shard"`
	Schema     string         `json:"schema"`
	Host       string         `json:"host"`
	DSN        string         `json:"dsn"`
	State      shardmgr.State `json:"state"`
	Generation int64          `json:"generation"`
	MovingTo   string         `json:"moving_to,omitempty"`
}

// WhereIs reads from the catalog where logical shard shard
// lives: its host (with the host's DSN from the cluster file, without a password), its
// schema and state. An id outside the cluster's shards is an error
// wrapping shardmgr.ErrUnknownShard.
func WhereIs(ctx context.Context, c *cluster.Cluster, shard int) (*ShardLocation, error) {
	cfg := c.Config()
	if err := cfg.CheckShard(shard); err != nil {
		return nil, err
	}
	st, err := readStatus(ctx, c)
	if err != nil {
		return nil, err
	}
	if shard >= len(st.Shards) {
		return nil, &shardmgr.ShardError{Shard: shard, Err: shardmgr.ErrUnknownShard}
	}
	s := st.Shards[shard]
	loc := &ShardLocation{Shard: s.ID, Schema: s.Schema, Host: s.Host, State: s.State, Generation: st.Generation}
	if h, ok := cfg.Host(s.Host); ok {
		loc.DSN = h.CatalogDSN() // as the catalog records it: no password
	}
	for _, mv := range st.Moves {
		if mv.Shard == shard {
			loc.MovingTo = mv.To
		}
	}
	return loc, nil
}

// hostProbeTimeout bounds how long status waits for one host to answer.
const hostProbeTimeout = 5 * time.Second

// probeHosts marks each host of st that the cluster file names and that
// does not answer a query within hostProbeTimeout as unreachable, with
// why; the hosts are asked at once.
func probeHosts(ctx context.Context, c *cluster.Cluster, st *Status) {
	var wg sync.WaitGroup
	for i := range st.Hosts {
		h, ok := c.Config().Host(st.Hosts[i].Name)
		if !ok {
			st.Hosts[i].Unreachable = "not in the cluster file"
			continue
		}
		wg.Go(func() {
			if err := probeHost(ctx, c, h.Name); err != nil {
				st.Hosts[i].Unreachable = err.Error()
			}
		})
	}
	wg.Wait()
}

// probeHost runs one query on host, within hostProbeTimeout.
func probeHost(ctx context.Context, c *cluster.Cluster, host string) error {
	ctx, cancel := context.WithTimeout(ctx, hostProbeTimeout)
	defer cancel()
	conn, err := acquire(ctx, c, host)
	if err == nil {
		defer conn.Release()
		_, err = conn.Exec(ctx, "SELECT 1")
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("no answer within %s", hostProbeTimeout)
	}
	return errors.New(pg.OneLine(err))
}

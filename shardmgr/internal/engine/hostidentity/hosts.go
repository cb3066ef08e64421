// Package hostidentity reads and proves what each host's database says of
// itself: which cluster and host name it belongs to (shardid.host_info),
// the secret whose hash the catalog keeps (shardid.host_secret, written
// here at init), and the shards it holds (shardid.local_shards, read
// through the root's ReadLocalShards), for every host of the cluster file
// through the operator's handle. Init, moves and catalog repair compare
// the catalog with these records (shardmgr.CompareHostRecords); verify and
// the host commands check a host's identity with it.
//
// It belongs to the engine layer (see shardmgr/internal/engine): it
// imports the root and the handle, and only operator packages import it.
package hostidentity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// Host is what one host of the cluster file records of itself.
type Host struct {
	Name string
	// Cluster and As are its shardid.host_info: the cluster and host name
	// its database belongs to ("" when it has no record yet).
	Cluster, As string
	Shards      []shardmgr.LocalShard
	// Err is why it could not be read (nil when it was).
	Err error
}

// Read reads the record of every host of the cluster file, all at once.
func Read(ctx context.Context, c *cluster.Cluster) []Host {
	hosts := c.Config().Hosts
	out := make([]Host, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			out[i] = readOne(ctx, c, h.Name)
		})
	}
	wg.Wait()
	return out
}

// ReadTimeout bounds the read of one host's record (its connection
// included).
const ReadTimeout = 30 * time.Second

func readOne(ctx context.Context, c *cluster.Cluster, name string) Host {
	h := readWithin(ctx, c, name)
	if h.Err != nil && ctx.Err() == nil && errors.Is(h.Err, context.DeadlineExceeded) {
		h.Err = fmt.Errorf("host %s: its record was not read within %s: %w", name, ReadTimeout, h.Err)
	}
	return h
}

func readWithin(ctx context.Context, c *cluster.Cluster, name string) Host {
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	h := Host{Name: name}
	p, err := c.HostPool(ctx, name, cluster.Session{})
	if err != nil {
		h.Err = err
		return h
	}
	if h.Cluster, h.As, err = ReadInfo(ctx, p); err != nil {
		h.Err = fmt.Errorf("host %s: read host record: %w", name, err)
		return h
	}
	if h.Shards, err = shardmgr.ReadLocalShards(ctx, p); err != nil {
		h.Err = fmt.Errorf("host %s: %w", name, err)
	}
	return h
}

// ReadInfo is the cluster and host name a host's database records about
// itself (shardid.host_info); "" for both when it records nothing (no
// shardid schema yet, or no row).
func ReadInfo(ctx context.Context, q pg.Querier) (cluster, host string, err error) {
	err = q.QueryRow(ctx, `SELECT cluster, host FROM shardid.host_info`).Scan(&cluster, &host)
	if errors.Is(err, pgx.ErrNoRows) || pg.IsUndefinedTable(err) {
		return "", "", nil
	}
	return cluster, host, err
}

// Records returns the shards of the hosts that were read and belong to
// cluster (as their own name), by host name: the argument of
// shardmgr.CompareHostRecords.
func Records(hosts []Host, cluster string) map[string][]shardmgr.LocalShard {
	out := map[string][]shardmgr.LocalShard{}
	for _, h := range hosts {
		if h.Err == nil && h.Cluster == cluster && h.As == h.Name {
			out[h.Name] = h.Shards
		}
	}
	return out
}

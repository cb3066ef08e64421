package migrate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
)

// fanOut is the per-shard fan-out that Migrate and UpgradeGenerators share:
// hosts in parallel, up to workers shards at a time on each host, every
// result reported to the host's progress as it comes, lock waits passed on
// one at a time, the results sorted by shard and the failures gathered in
// one *shardmgr.ShardErrors.
type fanOut[R any] struct {
	op       string // names the run in errors: "migrate up", "generator upgrade"
	workers  int
	failFast bool // the first failure stops the shards not started yet
	progress func(HostProgress)
	waiting  func(LockWait)
	// outcome says which shard a result is about and how it went.
	outcome func(R) (id int, host string, err error, stopped bool)
	// done logs a result (called with the results serialised).
	done func(R)
}

// shardWork does one shard: conn opens (once per worker) a connection to
// the shard's host, waiting reports a lock wait, stop is set once a
// fail-fast run should start no more shards.
type shardWork[R any] func(host string, sh shardmgr.Shard, conn func() (*pgx.Conn, error), waiting func(LockWait), stop *atomic.Bool) R

// run does work on every shard and returns the results ascending by shard
// with a *shardmgr.ShardErrors when some failed (or were stopped), or the
// context's error when the run was interrupted.
func (f fanOut[R]) run(ctx context.Context, c *cluster.Cluster, shards []shardmgr.Shard, work shardWork[R]) ([]R, error) {
	var (
		mu       sync.Mutex
		results  = make([]R, 0, len(shards))
		progress = hostProgress(shards)
		stop     atomic.Bool
	)
	report := func(r R) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, r)
		_, host, err, _ := f.outcome(r)
		p := progress[host]
		p.Done++
		if err != nil {
			p.Failed++
			if f.failFast {
				stop.Store(true)
			}
		}
		if f.done != nil {
			f.done(r)
		}
		if f.progress != nil {
			f.progress(*p)
		}
	}
	waiting := func(w LockWait) {
		if f.waiting != nil {
			mu.Lock()
			defer mu.Unlock()
			f.waiting(w)
		}
	}
	eachShard(ctx, c, shards, f.workers, func(host string, sh shardmgr.Shard, conn func() (*pgx.Conn, error)) {
		report(work(host, sh, conn, waiting, &stop))
	})
	slices.SortFunc(results, func(a, b R) int {
		ia, _, _, _ := f.outcome(a)
		ib, _, _, _ := f.outcome(b)
		return ia - ib
	})
	if err := ctx.Err(); err != nil {
		// Interrupted: the shards finished so far are in the result; a
		// shard in the middle of a step rolled it back.
		return results, fmt.Errorf("%s interrupted after %d of %d shards: %w", f.op, len(results), len(shards), err)
	}
	serr := &shardmgr.ShardErrors{Op: f.op, Total: len(results)}
	for _, r := range results {
		_, _, err, stopped := f.outcome(r)
		if err != nil {
			serr.Errs = append(serr.Errs, err)
		}
		if stopped {
			serr.Stopped++
		}
	}
	if len(serr.Errs) > 0 || serr.Stopped > 0 {
		return results, serr
	}
	return results, nil
}

// eachShard calls fn for every shard: hosts in parallel, and on each host
// up to workers shards at a time, each worker with a connection of its own
// that fn gets from conn (taken from the handle's pool on the host on
// first use; once that fails, conn returns the error for the worker's
// later shards too). The connection is closed, not put back, when the
// worker ends: a migration may leave session state behind.
func eachShard(ctx context.Context, cl *cluster.Cluster, shards []shardmgr.Shard, workers int, fn func(host string, sh shardmgr.Shard, conn func() (*pgx.Conn, error))) {
	byHost := map[string][]shardmgr.Shard{}
	for _, s := range shards {
		byHost[s.Host] = append(byHost[s.Host], s)
	}
	var hostsWG sync.WaitGroup
	for name, list := range byHost {
		hostsWG.Go(func() {
			work := make(chan shardmgr.Shard)
			var wg sync.WaitGroup
			for range min(workers, len(list)) {
				wg.Go(func() {
					var (
						pc      *pgxpool.Conn
						connErr error
					)
					defer func() {
						if pc != nil {
							pc.Conn().Close(context.WithoutCancel(ctx))
							pc.Release()
						}
					}()
					conn := func() (*pgx.Conn, error) {
						if pc != nil && pc.Conn().IsClosed() {
							pc.Release()
							pc = nil
						}
						if pc == nil && connErr == nil {
							var p *pgxpool.Pool
							if p, connErr = cl.HostPool(ctx, name, cluster.Session{}); connErr == nil {
								pc, connErr = p.Acquire(ctx)
							}
							if connErr != nil {
								pc, connErr = nil, fmt.Errorf("connect to host %s: %w", name, connErr)
							}
						}
						if pc == nil {
							return nil, connErr
						}
						return pc.Conn(), nil
					}
					for sh := range work {
						fn(name, sh, conn)
					}
				})
			}
			for _, sh := range list {
				select {
				case work <- sh:
				case <-ctx.Done():
				}
			}
			close(work)
			wg.Wait()
		})
	}
	hostsWG.Wait()
}

// hostProgress starts the counts of every host the shards are on.
func hostProgress(shards []shardmgr.Shard) map[string]*HostProgress {
	out := map[string]*HostProgress{}
	for _, s := range shards {
		if out[s.Host] == nil {
			out[s.Host] = &HostProgress{Host: s.Host}
		}
		out[s.Host].Total++
	}
	return out
}

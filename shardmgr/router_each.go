package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
)

// TxForID runs fn in a read-write transaction on the shard that id was
// generated in, as Tx does for that shard: the shard is inside the id,
// decoded with the cluster's layout. A negative id, or one carrying a
// shard outside the cluster, is ErrUnknownShard and runs nothing.
func (r *Router) TxForID(ctx context.Context, id idgen.ID, fn func(ctx context.Context, tx pgx.Tx, s Shard) error) error {
	shard, err := r.ShardForID(id)
	if err != nil {
		return err
	}
	return r.Tx(ctx, shard, fn)
}

// ReadTxForID runs fn in a read-only transaction on the shard that id was
// generated in, as ReadTx does; an id whose shard is outside the cluster is
// ErrUnknownShard.
func (r *Router) ReadTxForID(ctx context.Context, id idgen.ID, fn func(ctx context.Context, tx pgx.Tx, s Shard) error) error {
	shard, err := r.ShardForID(id)
	if err != nil {
		return err
	}
	return r.ReadTx(ctx, shard, fn)
}

// EachShard runs fn once for every logical shard, each call in a read-only
// transaction on its shard's host (as ReadTx), at most concurrency at a
// time, for the queries that must see every shard: a count, a search by
// something that is not a key. fn may be called from several goroutines at
// once; it must not keep tx.
//
// A failing shard does not stop the others: EachShard waits for all and
// returns nil, or a *ShardErrors (Op "each shard") holding one *ShardError
// per failed shard in shard order. When ctx ends, shards not yet started
// are not started; each of them is in the *ShardErrors with ctx's error,
// so errors.Is(err, context.Canceled) holds and no shard goes unreported.
// To stop at the first failure, cancel ctx from fn.
//
// A concurrency below 1 is an error; beyond the pools' MaxConns the calls
// wait for connections.
func (r *Router) EachShard(ctx context.Context, concurrency int, fn func(ctx context.Context, tx pgx.Tx, s Shard) error) error {
	if concurrency < 1 {
		return fmt.Errorf("EachShard: concurrency %d: must be at least 1", concurrency)
	}
	if fn == nil {
		return fmt.Errorf("EachShard: fn is nil")
	}
	n := r.Shards()
	errs := make([]error, n)
	ids := make(chan int)
	var wg sync.WaitGroup
	for range min(concurrency, n) {
		wg.Go(func() {
			for id := range ids {
				if err := ctx.Err(); err != nil {
					s, _ := r.Shard(id)
					errs[id] = &ShardError{Shard: id, Host: s.Host, Err: fmt.Errorf("not started: %w", context.Cause(ctx))}
					continue
				}
				if err := r.ReadTx(ctx, id, fn); err != nil {
					var se *ShardError
					if !errors.As(err, &se) || se.Shard != id {
						err = &ShardError{Shard: id, Err: err}
					}
					errs[id] = err
				}
			}
		})
	}
	for id := range n {
		ids <- id
	}
	close(ids)
	wg.Wait()

	failed := &ShardErrors{Op: "each shard", Total: n}
	for _, err := range errs {
		if err != nil {
			failed.Errs = append(failed.Errs, err)
		}
	}
	if len(failed.Errs) > 0 {
		return failed
	}
	return nil
}

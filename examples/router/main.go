// Command router is the README's router example, whole: a service that
// writes a user's like to the user's shard, reads it back by its id alone
// and counts the user's likes over every shard. Run it in a directory
// holding the cluster's shardid.yaml, after `shardid init` and `shardid
// migrate up --dir ...` with a migration that creates the likes table
// (examples/shard-migrations/001_create_likes.sql, as the README's):
//
//	go run ./examples/router
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
)

func main() {
	if err := run(context.Background(), os.Stdout, 31337, 42); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer, userID, postID int64) error {
	cfg, err := shardmgr.LoadConfig("shardid.yaml") // the cluster file shardid init read
	if err != nil {
		return err
	}
	router, err := shardmgr.Open(ctx, cfg) // one pgxpool per host, map from the catalog
	if err != nil {
		return err
	}
	defer router.Close()

	var likeID idgen.ID
	shard := router.ShardForKey(userID) // key mod shards
	err = router.Tx(ctx, shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		// {likes} becomes "shard_0005"."likes", quoted; values go in as $1, $2.
		insert, err := s.SQL("INSERT INTO {likes} (user_id, post_id) VALUES ($1, $2) RETURNING id")
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, insert, userID, postID).Scan(&likeID) // id from the shard's next_id()
	})
	if err != nil {
		return err // refused with ErrShardMoving / ErrShardReadOnly while the shard moves
	}

	// The id carries its shard: no lookup table to find the row again.
	err = router.ReadTxForID(ctx, likeID, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		query, err := s.SQL("SELECT post_id FROM {likes} WHERE id = $1")
		if err != nil {
			return err
		}
		var post int64
		if err := tx.QueryRow(ctx, query, likeID).Scan(&post); err != nil {
			return err
		}
		fmt.Fprintf(out, "like %d of post %d lives in %s on %s\n", likeID, post, s.Schema, s.Host)
		return nil
	})
	if err != nil {
		return err
	}

	// A query that must see every shard: read-only, at most 8 shards at once.
	var likes atomic.Int64
	err = router.EachShard(ctx, 8, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		query, err := s.SQL("SELECT count(*) FROM {likes} WHERE post_id = $1")
		if err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, query, postID).Scan(&n); err != nil {
			return err
		}
		likes.Add(n)
		return nil
	})
	if err != nil {
		return err // a *shardmgr.ShardErrors naming each shard that failed
	}
	fmt.Fprintf(out, "post %d has %d likes on %d shards\n", postID, likes.Load(), router.Shards())
	return nil
}

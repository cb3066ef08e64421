package shardmgr_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
)

// Child rows live with their parent: a user's posts in the user's shard,
// a post's comments in the post's shard. The parent goes by its key, each
// child by its parent's id (TxForID).
func ExampleRouter_TxForID_children() {
	ctx := context.Background()
	r := exampleRouter(ctx)
	defer r.Close()

	userID := int64(31337)
	var postID idgen.ID
	err := r.Tx(ctx, r.ShardForKey(userID), func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		insert, err := s.SQL("INSERT INTO {posts} (user_id, body) VALUES ($1, $2) RETURNING id")
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, insert, userID, "hello").Scan(&postID) // the id carries the user's shard
	})
	if err != nil {
		log.Fatal(err)
	}
	// By the post's id: the comment lands in the post's (the user's) shard.
	// r.ShardForKey(int64(postID)) would pick another one: an id is not a key.
	err = r.TxForID(ctx, postID, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		insert, err := s.SQL("INSERT INTO {comments} (post_id, body) VALUES ($1, $2)")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insert, postID, "first!")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A router that waits out a move's cut-over (at most 5 s per call)
// instead of returning ErrShardMoving at once.
func ExampleWithRetryMoving() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	r, err := shardmgr.Open(ctx, cfg, shardmgr.WithRetryMoving(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	// fn may run more than once (each refused try rolled back): keep its
	// effects inside tx.
	err = r.Tx(ctx, r.ShardForKey(31337), func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		insert, err := s.SQL("INSERT INTO {likes} (user_id, post_id) VALUES ($1, $2)")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insert, 31337, 42)
		return err
	})
	if errors.Is(err, shardmgr.ErrShardMoving) {
		log.Print("still moving after 5 s: try again later")
	} else if err != nil {
		log.Fatal(err)
	}
}

package shardmgr_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
)

// A service opens the cluster once, writes a user's rows to the user's
// shard, and finds a row again from its id alone.
func ExampleRouter() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	r, err := shardmgr.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	userID := int64(31337)
	var likeID idgen.ID
	err = r.Tx(ctx, r.ShardForKey(userID), func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		// The table lives in the shard's schema; its id DEFAULT is the
		// shard's generator: CREATE TABLE shard_NNNN.likes (id bigint
		// PRIMARY KEY DEFAULT shard_NNNN.next_id(), user_id bigint, ...).
		return tx.QueryRow(ctx, "INSERT INTO "+s.Table("likes")+" (user_id) VALUES ($1) RETURNING id", userID).Scan(&likeID)
	})
	switch {
	case errors.Is(err, shardmgr.ErrShardReadOnly), errors.Is(err, shardmgr.ErrShardMoving):
		log.Printf("try again later: %v", err)
		return
	case err != nil:
		log.Fatal(err)
	}

	// The id names its shard: no lookup table needed.
	shard, err := r.ShardForID(likeID)
	if err != nil {
		log.Fatal(err)
	}
	err = r.ReadTx(ctx, shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		var user int64
		if err := tx.QueryRow(ctx, "SELECT user_id FROM "+s.Table("likes")+" WHERE id = $1", likeID).Scan(&user); err != nil {
			return err
		}
		fmt.Printf("like %d of user %d lives in %s on %s\n", likeID, user, s.Schema, s.Host)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

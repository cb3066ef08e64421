package shardmgr_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
)

// The examples that need a cluster compile in the test suite but do not
// run (they have no Output); examples/router runs the same calls against a
// real cluster. docs/shardmgr.md shows their bodies (examples/snippets_test.go
// keeps the two the same).

// exampleRouter opens the router of the cluster described in shardid.yaml.
func exampleRouter(ctx context.Context) *shardmgr.Router {
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	r, err := shardmgr.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	return r
}

// A service opens the cluster once, writes a user's rows to the user's
// shard, and finds a row again from its id alone.
func ExampleRouter() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml") // the cluster file shardid init read
	if err != nil {
		log.Fatal(err)
	}
	r, err := shardmgr.Open(ctx, cfg) // or OpenCatalog(ctx, dsn, WithLookupEnv(os.LookupEnv))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	userID := int64(31337)
	var likeID idgen.ID
	err = r.Tx(ctx, r.ShardForKey(userID), func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		// CREATE TABLE shard_NNNN.likes (id bigint PRIMARY KEY DEFAULT
		// shard_NNNN.next_id(), user_id bigint, post_id bigint) in every shard.
		insert, err := s.SQL("INSERT INTO {likes} (user_id, post_id) VALUES ($1, $2) RETURNING id")
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, insert, userID, 42).Scan(&likeID)
	})
	switch {
	case errors.Is(err, shardmgr.ErrShardReadOnly), errors.Is(err, shardmgr.ErrShardMoving):
		log.Printf("try again later: %v", err)
		return
	case err != nil:
		log.Fatal(err)
	}

	shard, err := r.ShardForID(likeID) // the id names its shard: no lookup table
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("like %d of user %d is in shard %d\n", likeID, userID, shard)
}

// Keys that are not integers map through a fixed hash (64-bit FNV-1a, see
// KeyHash): the same key lands on the same shard in every release.
func ExampleRouter_ShardForString() {
	ctx := context.Background()
	r := exampleRouter(ctx)
	defer r.Close()

	email := "alice@example.com"
	err := r.Tx(ctx, r.ShardForString(email), func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		insert, err := s.SQL("INSERT INTO {accounts} (email) VALUES ($1)")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insert, email)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	token := [16]byte{0x0b, 0x8f, 0x5c, 0x1e} // a UUID, a hash: any bytes
	fmt.Println(r.ShardForBytes(token[:]))
}

// With an id in hand, one call finds its shard and runs the transaction.
func ExampleRouter_TxForID() {
	ctx := context.Background()
	r := exampleRouter(ctx)
	defer r.Close()

	likeID := idgen.ID(1898123456789012345) // from a request, a row, a message
	err := r.TxForID(ctx, likeID, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		del, err := s.SQL("DELETE FROM {likes} WHERE id = $1")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, del, likeID)
		return err
	})
	if errors.Is(err, shardmgr.ErrUnknownShard) {
		log.Printf("%d is not an id of this cluster: %v", likeID, err)
	} else if err != nil {
		log.Fatal(err)
	}
}

// A query that must see every shard runs on each in a read-only
// transaction, a few shards at a time.
func ExampleRouter_EachShard() {
	ctx := context.Background()
	r := exampleRouter(ctx)
	defer r.Close()

	var (
		mu     sync.Mutex
		latest []idgen.ID
	)
	err := r.EachShard(ctx, 8, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		query, err := s.SQL("SELECT id FROM {likes} ORDER BY id DESC LIMIT 10")
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, query)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[idgen.ID])
		if err != nil {
			return err
		}
		mu.Lock() // fn runs on up to 8 shards at once
		defer mu.Unlock()
		latest = append(latest, ids...)
		return nil
	})
	var failed *shardmgr.ShardErrors
	if errors.As(err, &failed) {
		for _, e := range failed.Errs { // one *ShardError per failed shard
			log.Print(e)
		}
	}
	fmt.Println(len(latest))
}

// Between a move's flip and the router's next refresh a write can meet the
// old host; the router then says ErrShardMoving and reloads its map, so a
// retry goes to the new host.
func ExampleRouter_Tx_retry() {
	ctx := context.Background()
	r := exampleRouter(ctx)
	defer r.Close()
	shard := r.ShardForKey(31337)
	insert := func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		q, err := s.SQL("INSERT INTO {likes} (user_id, post_id) VALUES (31337, 42)")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, q)
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a cut-over refuses writes for well under a second
	defer cancel()
	var err error
	for {
		err = r.Tx(ctx, shard, insert)
		if !errors.Is(err, shardmgr.ErrShardMoving) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// SQL quotes every {name} as a table in the shard's schema; values stay
// parameters. A malformed template is refused, not sent.
func ExampleShard_SQL() {
	s := shardmgr.Shard{ID: 5, Schema: "shard_0005"} // as Tx, ReadTx and EachShard pass it
	q, err := s.SQL("INSERT INTO {likes} (user_id, post_id) VALUES ($1, $2)")
	fmt.Println(q, err)
	q, _ = s.SQL(`SELECT * FROM {likes"; DROP TABLE users; --}`) // a hostile name stays one name
	fmt.Println(q)
	_, err = s.SQL("SELECT * FROM {likes WHERE id = $1")
	fmt.Println(err)
	fmt.Println(s.Ident("likes").Sanitize()) // for tx.CopyFrom(ctx, s.Ident("likes"), ...)
	// Output:
	// INSERT INTO "shard_0005"."likes" (user_id, post_id) VALUES ($1, $2) <nil>
	// SELECT * FROM "shard_0005"."likes""; DROP TABLE users; --"
	// malformed SQL template: { without } at byte 14 of "SELECT * FROM {likes WHERE id = $1"
	// "shard_0005"."likes"
}

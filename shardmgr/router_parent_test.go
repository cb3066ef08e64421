package shardmgr_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// docs/shardmgr.md's child rows: posts inserted by the user's key, each
// comment by its post's id (TxForID), all land in the user's shard, and a
// comment is found again by its own id; ShardForKey of a post's id is not
// a way to find it (for most ids it names another shard).
func TestRouterChildRowsFollowTheirParent(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 8)
	set, err := migrate.LoadMigrationSet(clustertest.MapFS(map[string]string{"001_posts.sql": `
		CREATE TABLE {{.schema}}.posts (id bigint PRIMARY KEY DEFAULT {{.next_id}}, user_id bigint NOT NULL, body text);
		CREATE TABLE {{.schema}}.comments (id bigint PRIMARY KEY DEFAULT {{.next_id}}, post_id bigint NOT NULL REFERENCES {{.schema}}.posts, body text);`}))
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg)

	// ShardForKey is key mod shards: of a post's id, its sequence's low
	// bits. On a slow machine every statement starts a new millisecond, so
	// every post's sequence is 1 or 2 (just pulled up to the clock); the
	// user's shard must then be neither, or the posts' ids could all land
	// on it by that coincidence (31337 is shard 1 of 8, which they did,
	// under load).
	const userID = 31341 // shard 5 of 8
	userShard := r.ShardForKey(userID)
	elsewhere := 0
	for i := range 20 {
		var postID, commentID idgen.ID
		require.NoError(t, r.Tx(ctx(t), userShard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			return tx.QueryRow(ctx, "INSERT INTO "+s.Table("posts")+" (user_id, body) VALUES ($1, 'p') RETURNING id", userID).Scan(&postID)
		}))
		// The foreign key holds only in the post's own shard.
		require.NoError(t, r.TxForID(ctx(t), postID, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			require.Equal(t, userShard, s.ID, "post %d", i)
			return tx.QueryRow(ctx, "INSERT INTO "+s.Table("comments")+" (post_id, body) VALUES ($1, 'c') RETURNING id", postID).Scan(&commentID)
		}))
		got, err := r.ShardForID(commentID)
		require.NoError(t, err)
		require.Equal(t, userShard, got, "the comment's id carries the user's shard")
		var body string
		require.NoError(t, r.ReadTxForID(ctx(t), commentID, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			return tx.QueryRow(ctx, "SELECT body FROM "+s.Table("comments")+" WHERE id = $1 AND post_id = $2", commentID, postID).Scan(&body)
		}))
		require.Equal(t, "c", body)
		if r.ShardForKey(int64(postID)) != userShard {
			elsewhere++
		}
	}
	require.Positive(t, elsewhere, "ShardForKey of a post's id lands outside the user's shard")
}

-- shard-migrations/001_create_likes.sql
CREATE TABLE {{.schema}}.likes (
    id      bigint PRIMARY KEY DEFAULT {{.next_id}},   -- shard_0005.next_id()
    user_id bigint NOT NULL,
    post_id bigint NOT NULL
);
---- create above / drop below ----
DROP TABLE {{.schema}}.likes;

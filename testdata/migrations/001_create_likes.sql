-- Every logical shard gets the same table; its ids come from the shard's
-- own generator, so they carry the shard and never repeat.
CREATE TABLE {{.schema}}.likes (
    id         bigint      PRIMARY KEY DEFAULT {{.next_id}},
    user_id    bigint      NOT NULL,
    post_id    bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE {{.schema}}.likes IS 'likes of logical shard {{.shard_id}}';

---- create above / drop below ----

DROP TABLE {{.schema}}.likes;

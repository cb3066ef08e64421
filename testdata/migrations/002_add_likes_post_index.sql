CREATE INDEX likes_post_id_idx ON {{.schema}}.likes (post_id, created_at);

---- create above / drop below ----

DROP INDEX {{.schema}}.likes_post_id_idx;

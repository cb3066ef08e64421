-- What a host database records about itself, so that the catalog and the
-- hosts can be checked against each other (shardid verify).

CREATE TABLE shardid.host_info (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    cluster     text        NOT NULL,
    host        text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The logical shards this database holds, with the catalog state and
-- generation at which they were last written here.
CREATE TABLE shardid.local_shards (
    shard       integer     PRIMARY KEY CHECK (shard BETWEEN 0 AND 8191),
    schema_name text        NOT NULL UNIQUE,
    state       text        NOT NULL CHECK (state IN ('active', 'read-only', 'moving', 'fenced')),
    generation  bigint      NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT now()
);

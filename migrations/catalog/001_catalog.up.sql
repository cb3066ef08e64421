-- The catalog: the single source of truth for which logical shard lives on
-- which host. Every change bumps cluster.generation in the same transaction.

CREATE TABLE shardid.cluster (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    name        text        NOT NULL,
    shards      integer     NOT NULL CHECK (shards BETWEEN 1 AND 8192),
    epoch_ms    bigint      NOT NULL CHECK (epoch_ms >= 0),
    time_bits   integer     NOT NULL CHECK (time_bits > 1),
    shard_bits  integer     NOT NULL CHECK (shard_bits > 0),
    seq_bits    integer     NOT NULL CHECK (seq_bits > 0),
    variant     text        NOT NULL DEFAULT 'safe' CHECK (variant IN ('safe', 'instagram')),
    generation  bigint      NOT NULL CHECK (generation > 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (time_bits + shard_bits + seq_bits IN (63, 64)),
    CHECK (shards <= (1 << shard_bits))
);

CREATE TABLE shardid.hosts (
    name        text        PRIMARY KEY,
    -- as written in the cluster file, ${VAR}s unexpanded: no passwords here
    dsn         text        NOT NULL UNIQUE,
    drain       boolean     NOT NULL DEFAULT false,
    added_generation bigint NOT NULL
);

CREATE TABLE shardid.shards (
    id          integer     PRIMARY KEY CHECK (id BETWEEN 0 AND 8191),
    schema_name text        NOT NULL UNIQUE,
    host        text        NOT NULL REFERENCES shardid.hosts (name) ON UPDATE CASCADE,
    state       text        NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'read-only', 'moving')),
    changed_generation bigint NOT NULL
);
CREATE INDEX shards_host_idx ON shardid.shards (host);

-- One row per generation: what changed, when and by whom.
CREATE TABLE shardid.changes (
    generation  bigint      PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    by_user     text        NOT NULL DEFAULT current_user,
    what        text        NOT NULL
);

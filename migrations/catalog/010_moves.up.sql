-- The journal of shard moves (shardid rebalance, shardid shard move): one row
-- per move, with the last phase it completed, so that an interrupted move is
-- resumed or aborted from where it stopped. The flip of the map and the move's
-- phase change to 'flipped' are written in one catalog transaction.

CREATE TABLE shardid.moves (
    id              bigserial   PRIMARY KEY,
    shard           integer     NOT NULL REFERENCES shardid.shards (id),
    from_host       text        NOT NULL REFERENCES shardid.hosts (name) ON UPDATE CASCADE,
    to_host         text        NOT NULL REFERENCES shardid.hosts (name) ON UPDATE CASCADE,
    mode            text        NOT NULL CHECK (mode IN ('online', 'offline')),
    phase           text        NOT NULL DEFAULT 'planned' CHECK (phase IN
                        ('planned', 'schema', 'copy', 'catchup', 'fenced', 'verified', 'flipped', 'cleaned', 'aborted')),
    -- publication, subscription and replication slot name: unique per move
    repl_name       text        NOT NULL UNIQUE,
    -- the source schema and, once retired, its new name
    schema_name     text        NOT NULL,
    retired_schema  text,
    -- the source counter's MAXVALUE before the fence lowered it
    counter_max     bigint,
    -- the migration version the shard was built at on the target
    version         integer,
    bytes           bigint      NOT NULL DEFAULT 0,
    rows_copied     bigint      NOT NULL DEFAULT 0,
    -- how long writes to the shard were refused (moving state to flip)
    refused_ms      bigint,
    keep_ms         bigint      NOT NULL DEFAULT 0,
    keep_until      timestamptz,
    retired_dropped_at timestamptz,
    flip_generation bigint,
    error           text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    fenced_at       timestamptz,
    finished_at     timestamptz,
    CHECK (from_host <> to_host)
);

-- At most one open move per shard.
CREATE UNIQUE INDEX moves_open_shard_idx ON shardid.moves (shard) WHERE phase NOT IN ('cleaned', 'aborted');

-- Worker ids for idgen/snowflake, leased instead of configured: one row per
-- (datacenter, worker) ever leased. A holder renews expires_at by heartbeat
-- and stops issuing before it passes. used_until_ms is the last Unix
-- millisecond any holder of the worker may have put into an id, so the next
-- holder starts strictly after it. token, from one sequence, grows with
-- every acquisition: the fencing token.
CREATE SEQUENCE IF NOT EXISTS shardid.snowflake_lease_tokens;

CREATE TABLE IF NOT EXISTS shardid.snowflake_leases (
    datacenter    integer NOT NULL CHECK (datacenter >= 0),
    worker        integer NOT NULL CHECK (worker >= 0),
    token         bigint NOT NULL,
    holder        text NOT NULL,
    expires_at    timestamptz NOT NULL,
    used_until_ms bigint NOT NULL,
    acquired_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (datacenter, worker)
);

-- What the lease table must not forget when rows are deleted by hand (or
-- the table truncated): per datacenter, the highest worker number ever
-- leased and the newest last-possible-time (Unix ms) any holder promised.
-- A worker with no row is fresh only above max_worker; at or below it, it
-- may have had a row a holder still issues under, so its next holder
-- starts after used_until_ms. Every acquisition and renewal raises both
-- in the same transaction, locking this row before the lease row.
CREATE TABLE IF NOT EXISTS shardid.snowflake_lease_marks (
    datacenter    integer PRIMARY KEY CHECK (datacenter >= 0),
    max_worker    integer NOT NULL DEFAULT -1,
    used_until_ms bigint NOT NULL DEFAULT 0
);

INSERT INTO shardid.snowflake_lease_marks (datacenter, max_worker, used_until_ms)
SELECT datacenter, max(worker), max(used_until_ms) FROM shardid.snowflake_leases GROUP BY datacenter
ON CONFLICT (datacenter) DO UPDATE
SET max_worker = GREATEST(shardid.snowflake_lease_marks.max_worker, EXCLUDED.max_worker),
    used_until_ms = GREATEST(shardid.snowflake_lease_marks.used_until_ms, EXCLUDED.used_until_ms);

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

-- A row's used_until_ms only grows, except in a release: the holder's own
-- UPDATE that keeps its token and expires the lease now (Close records the
-- last time it actually used). An operator's UPDATE that lowers it any
-- other way keeps the old value: the next holder starts after it.
CREATE OR REPLACE FUNCTION shardid.snowflake_leases_keep_promise() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.used_until_ms < OLD.used_until_ms
       AND NOT (NEW.token = OLD.token AND NEW.expires_at <= now() AND NEW.worker = OLD.worker AND NEW.datacenter = OLD.datacenter) THEN
        NEW.used_until_ms := OLD.used_until_ms;
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION shardid.snowflake_leases_keep_promise() FROM PUBLIC;
DROP TRIGGER IF EXISTS keep_promise ON shardid.snowflake_leases;
CREATE TRIGGER keep_promise BEFORE UPDATE ON shardid.snowflake_leases
    FOR EACH ROW EXECUTE FUNCTION shardid.snowflake_leases_keep_promise();

-- The marks only grow, and are never deleted: they are what a worker
-- without a row is measured against.
CREATE OR REPLACE FUNCTION shardid.snowflake_lease_marks_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        NEW.max_worker := GREATEST(NEW.max_worker, OLD.max_worker);
        NEW.used_until_ms := GREATEST(NEW.used_until_ms, OLD.used_until_ms);
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'shardid.snowflake_lease_marks must not be deleted from: a snowflake worker without a lease row is measured against it (docs/schemes.md)'
        USING ERRCODE = 'restrict_violation';
END $$;
REVOKE ALL ON FUNCTION shardid.snowflake_lease_marks_keep() FROM PUBLIC;
DROP TRIGGER IF EXISTS keep_marks ON shardid.snowflake_lease_marks;
CREATE TRIGGER keep_marks BEFORE UPDATE OR DELETE ON shardid.snowflake_lease_marks
    FOR EACH ROW EXECUTE FUNCTION shardid.snowflake_lease_marks_keep();
DROP TRIGGER IF EXISTS keep_marks_truncate ON shardid.snowflake_lease_marks;
CREATE TRIGGER keep_marks_truncate BEFORE TRUNCATE ON shardid.snowflake_lease_marks
    FOR EACH STATEMENT EXECUTE FUNCTION shardid.snowflake_lease_marks_keep();

-- The install SQL of shard 21 as rendered by shardid before next_id_advance was
-- revoked from PUBLIC (commit 56f12c1, sql/templates/safe.sql.tmpl): PUBLIC may
-- execute next_id_advance(bigint): it has no REVOKE on purpose, and
-- TestReinstallRevokesPublicAdvance repairs it with the current install SQL.
-- shardid generator (variant safe, v1) for logical shard 21 in schema shard_0021.
-- Layout 41/13/10, epoch 1314220021721 ms. Idempotent: running it again never resets the counter.
-- Why it cannot repeat an id: docs/uniqueness.md.
CREATE SCHEMA IF NOT EXISTS shard_0021;

-- The counter is (milliseconds since the epoch << 10) | n. CACHE 1 keeps values
-- in one global order across sessions, which the fence below relies on.
CREATE SEQUENCE IF NOT EXISTS shard_0021.next_id_counter
  AS bigint MINVALUE 0 MAXVALUE 1125899906842623 START WITH 0 CACHE 1 NO CYCLE;
DO $shardid$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_sequence s
             WHERE s.seqrelid = 'shard_0021.next_id_counter'::pg_catalog.regclass
               AND (s.seqcache <> 1 OR s.seqcycle OR s.seqincrement <> 1)) THEN
    ALTER SEQUENCE shard_0021.next_id_counter INCREMENT BY 1 CACHE 1 NO CYCLE;
  END IF;
END
$shardid$;

-- Pull the counter up to the clock. Only here does the counter jump, and only
-- under the exclusive advisory lock, which no next_id() holds its shared lock
-- against: so the value read here is the highest ever handed out, and setval
-- only ever moves forward. It never waits: when the lock is busy it gives up
-- and the counter stays behind the clock for this call (still unique).
CREATE OR REPLACE FUNCTION shard_0021.next_id_pull_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $shardid$
DECLARE
  target bigint;
  v bigint;
BEGIN
  FOR i IN 1..64 LOOP
    IF pg_try_advisory_lock(1936222564, 21) THEN
      BEGIN
        target := (pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint - 1314220021721) << 10;
        v := nextval('shard_0021.next_id_counter');
        IF v < target AND target <= 1125899906842623 THEN
          PERFORM setval('shard_0021.next_id_counter', target, true);
        END IF;
        PERFORM pg_advisory_unlock(1936222564, 21);
      EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock(1936222564, 21);
        RAISE;
      END;
      RETURN true;
    END IF;
  END LOOP;
  RETURN true;
END
$shardid$;

-- Raise the counter so that every later id is greater than min_id: used when a
-- shard is restored or moved, so the new home cannot repeat an id the old one
-- handed out. Waits for the exclusive lock (bounded by the caller's lock_timeout).
CREATE OR REPLACE FUNCTION shard_0021.next_id_advance(min_id bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $shardid$
DECLARE
  floor_counter bigint := ((min_id >> 23) << 10) | (min_id & 1023);
  v bigint;
BEGIN
  PERFORM pg_advisory_lock(1936222564, 21);
  BEGIN
    v := nextval('shard_0021.next_id_counter');
    IF v < floor_counter THEN
      PERFORM setval('shard_0021.next_id_counter', floor_counter, true);
      v := floor_counter;
    END IF;
    PERFORM pg_advisory_unlock(1936222564, 21);
  EXCEPTION WHEN OTHERS OR query_canceled THEN
    PERFORM pg_advisory_unlock(1936222564, 21);
    RAISE;
  END;
  RETURN v;
END
$shardid$;

-- The generator. A single SQL expression, so PostgreSQL inlines it into the
-- calling query (a column DEFAULT, a SELECT): no function call per id. Read it
-- inside out: if the counter lags the clock by more than 1 ms, pull it up;
-- take the shared lock; nextval; compose the id by inserting the shard bits
-- above the sequence bits; release the shared lock. Argument evaluation order
-- makes each step happen after the one before.
CREATE OR REPLACE FUNCTION shard_0021.next_id() RETURNS bigint
LANGUAGE sql VOLATILE AS $shardid$
SELECT overlay(pg_catalog.nextval(
         CASE WHEN (pg_catalog.pg_sequence_last_value('shard_0021.next_id_counter'::pg_catalog.regclass)
                      OPERATOR(pg_catalog.>=) ((pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint OPERATOR(pg_catalog.-) 1314220021722) OPERATOR(pg_catalog.<<) 10)
                    OR shard_0021.next_id_pull_up())
               AND pg_catalog.pg_advisory_lock_shared(1936222564, 21)::text OPERATOR(pg_catalog.=) ''
              THEN 'shard_0021.next_id_counter'::pg_catalog.regclass END
       )::bit(50) PLACING B'0000000010101' FROM 41 FOR 0)::bigint
       OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 21) THEN 0 END
$shardid$;

-- A role with INSERT on a table may use the DEFAULT: it needs USAGE on the
-- schema (as for the table itself) and on the counter; burning counter values
-- can never cause a repeat.
GRANT USAGE, SELECT ON SEQUENCE shard_0021.next_id_counter TO PUBLIC;
COMMENT ON FUNCTION shard_0021.next_id() IS 'shardid generator v1 variant=safe shard=21 epoch=1314220021721 layout=41/13/10';

-- Read ids inside PostgreSQL: the time, shard and sequence of a bigint id.
CREATE OR REPLACE FUNCTION shard_0021.id_time(id bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $shardid$
SELECT pg_catalog.to_timestamp(((id OPERATOR(pg_catalog.>>) 23) OPERATOR(pg_catalog.+) 1314220021721)::double precision OPERATOR(pg_catalog./) 1000)
$shardid$;
CREATE OR REPLACE FUNCTION shard_0021.id_shard(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $shardid$
SELECT ((id OPERATOR(pg_catalog.>>) 10) OPERATOR(pg_catalog.&) 8191)::integer
$shardid$;
CREATE OR REPLACE FUNCTION shard_0021.id_seq(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $shardid$
SELECT (id OPERATOR(pg_catalog.&) 1023)::integer
$shardid$;

-- One transaction: nothing is visible to other sessions before the REVOKE below.
BEGIN;
-- shardid generator (variant safe, v2) for logical shard 22 in schema shard_0022.
-- Layout 41/13/10, epoch 1314220021721 ms. Idempotent: running it again never resets the counter.
-- Why it cannot repeat an id: docs/uniqueness.md.
-- Who owns what is already here. Everything the toolkit relies on in this schema
-- (generator, counter, helpers, the fence's trigger function) must belong to the role
-- that runs this SQL: a role that owned one could replace it (a fence that lets every
-- write through, a pull-up that moves the counter anywhere), and CREATE OR REPLACE
-- run by a superuser would keep that owner. So nothing is created or replaced while
-- another role owns one of them: the error names the object and its owner
-- (docs/uniqueness.md#owners). A relation under the counter's name must be a sequence.
DO $shardid$
DECLARE
  o record;
BEGIN
  FOR o IN
    SELECT pg_catalog.format('function %s', p.oid::pg_catalog.regprocedure) AS what,
           pg_catalog.pg_get_userbyid(p.proowner) AS owner, true AS right_kind
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE n.nspname OPERATOR(pg_catalog.=) 'shard_0022'
       AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['next_id', 'next_id_pull_up', 'next_id_advance', 'id_time', 'id_shard', 'id_seq', 'shardid_fence']::pg_catalog.name[])
    UNION ALL
    SELECT pg_catalog.format('%s %s', CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' ELSE 'relation' END, c.oid::pg_catalog.regclass),
           pg_catalog.pg_get_userbyid(c.relowner), c.relkind OPERATOR(pg_catalog.=) 'S'
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE n.nspname OPERATOR(pg_catalog.=) 'shard_0022'
       AND c.relname OPERATOR(pg_catalog.=) ANY (ARRAY['next_id_counter', 'table_id_seq']::pg_catalog.name[])
  LOOP
    IF o.owner IS DISTINCT FROM current_user THEN
      RAISE EXCEPTION USING
        ERRCODE = 'SIDOW',
        MESSAGE = pg_catalog.format('%s is owned by role %s, not by %s, the role installing the shardid generator: refusing to create or replace anything in schema shard_0022', o.what, o.owner, current_user),
        HINT = 'another role created it (a role with CREATE on the schema?): check what it does, then drop it or ALTER ... OWNER TO the toolkit''s role, and run the install again';
    END IF;
    IF NOT o.right_kind THEN
      RAISE EXCEPTION USING
        ERRCODE = 'SIDOW',
        MESSAGE = pg_catalog.format('%s is not a sequence: refusing to install the shardid generator in schema shard_0022', o.what),
        HINT = 'drop it or rename it, and run the install again';
    END IF;
  END LOOP;
END
$shardid$;

CREATE SCHEMA IF NOT EXISTS shard_0022;

-- The counter is (milliseconds since the epoch << 10) | n. CACHE 1 keeps values
-- in one global order across sessions, which the fence below relies on.
CREATE SEQUENCE IF NOT EXISTS shard_0022.next_id_counter
  AS bigint MINVALUE 0 MAXVALUE 1125899906842623 START WITH 0 CACHE 1 NO CYCLE;
DO $shardid$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_sequence s
             WHERE s.seqrelid = 'shard_0022.next_id_counter'::pg_catalog.regclass
               AND (s.seqcache <> 1 OR s.seqcycle OR s.seqincrement <> 1)) THEN
    ALTER SEQUENCE shard_0022.next_id_counter INCREMENT BY 1 CACHE 1 NO CYCLE;
  END IF;
END
$shardid$;

-- Pull the counter up to the clock. Only here (and in the advance) does the
-- PL/pgSQL generator's counter jump, and only under the exclusive advisory lock,
-- which no PL/pgSQL next_id() holds its shared lock against: so the value read
-- here is the highest ever handed out, and setval only ever moves forward. Where
-- the shardid extension is installed the jump is its atomic forward-only raise
-- instead, which holds against the C next_id() too (it takes no advisory lock).
-- It never waits: when the lock is busy it gives up and the counter stays behind
-- the clock for this call (still unique).
CREATE OR REPLACE FUNCTION shard_0022.next_id_pull_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $shardid$
DECLARE
  target bigint;
  v bigint;
BEGIN
  FOR i IN 1..64 LOOP
    IF pg_try_advisory_lock(1936222564, 22) THEN
      BEGIN
        target := (pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint - 1314220021721) << 10;
        v := nextval('shard_0022.next_id_counter');
        IF v < target AND target <= 1125899906842623 THEN
          -- Forward only, atomically with every nextval, where the shardid extension is
          -- installed (its C next_id() draws without the advisory lock, so a setval here
          -- could move the counter back under a value it drew): docs/uniqueness.md#the-c-generator.
          IF EXISTS (SELECT FROM pg_catalog.pg_extension e
                   JOIN pg_catalog.pg_depend d ON d.refobjid = e.oid
                   JOIN pg_catalog.pg_proc p ON p.oid = d.objid
                   JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                 WHERE e.extname = 'shardid' AND d.deptype = 'e'
                   AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                   AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                   AND p.proname = 'counter_raise' AND p.pronamespace = e.extnamespace
                   AND p.proargtypes = '2205 20'::pg_catalog.oidvector -- (regclass, bigint)
                   AND n.nspname = 'shardid_ext'
                   AND pg_catalog.has_schema_privilege(e.extnamespace, 'USAGE')
                   AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) THEN
            PERFORM shardid_ext.counter_raise('shard_0022.next_id_counter', target);
          ELSE
            PERFORM setval('shard_0022.next_id_counter', target, true);
          END IF;
        END IF;
        PERFORM pg_advisory_unlock(1936222564, 22);
      EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock(1936222564, 22);
        RAISE;
      END;
      RETURN true;
    END IF;
  END LOOP;
  RETURN true;
END
$shardid$;
-- next_id_pull_up stays PUBLIC's on purpose: next_id() is inlined and runs as
-- its caller, so every role that inserts must be able to call it, and it moves
-- the counter only up to the server's clock (clock_timestamp(), which no session
-- can set), plus the one value its nextval uses, as PUBLIC's USAGE on the
-- counter allows anyway.
GRANT EXECUTE ON FUNCTION shard_0022.next_id_pull_up() TO PUBLIC;

-- Raise the counter so that every later id is greater than min_id: used when a
-- shard is restored or moved, so the new home cannot repeat an id the old one
-- handed out. Waits for the exclusive lock (bounded by the caller's lock_timeout).
-- A floor the clock would not reach within 3600000 ms is refused (SQLSTATE
-- SIDAD) unless force is true: a typo must not burn the id space; one
-- beyond 315360000000 ms is refused even with force (SIDAL). Only the
-- owner (and roles it grants EXECUTE) may call it: see the REVOKE below.
-- The one-argument form of older releases is dropped first, because CREATE OR
-- REPLACE cannot change an argument list.
DROP FUNCTION IF EXISTS shard_0022.next_id_advance(bigint);
CREATE OR REPLACE FUNCTION shard_0022.next_id_advance(min_id bigint, force boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $shardid$
DECLARE
  floor_counter bigint := ((min_id >> 23) << 10) | (min_id & 1023);
  now_ms bigint;
  limit_ms bigint;
  reach bigint;
  v bigint;
BEGIN
  PERFORM pg_advisory_lock(1936222564, 22);
  BEGIN
    v := nextval('shard_0022.next_id_counter');
    IF v < floor_counter THEN
      now_ms := (pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint) - 1314220021721;
      -- Never, forced or not, beyond 315360000000 ms past the clock nor within
      -- 86400000 ms of the counter's maximum: a counter taken there leaves the
      -- shard without ids (every next_id() fails for good at the maximum), and no
      -- generator hands out an id that far ahead. Bounded in ms before shifting.
      limit_ms := least(now_ms + 315360000000, (1125899906842623 >> 10) - 86400000);
      IF limit_ms < 0 OR floor_counter > ((limit_ms << 10) | 1023) THEN
        RAISE EXCEPTION USING
          ERRCODE = 'SIDAL',
          MESSAGE = format('shard_0022.next_id_advance(%s): that id lies %s ahead of the clock; the counter is never advanced more than %s past the clock nor to within %s of its maximum, forced or not',
                           min_id, make_interval(secs => ((floor_counter >> 10) - now_ms) / 1000.0),
                           make_interval(secs => 315360000000 / 1000), make_interval(secs => 86400000 / 1000)),
          HINT = 'no shardid generator made an id that far ahead: find the rows holding it (shardid verify names them) and correct them';
      END IF;
      reach := ((now_ms + least(3600000, limit_ms - now_ms)) << 10) | 1023;
      IF floor_counter > reach AND NOT coalesce(force, false) THEN
        RAISE EXCEPTION USING
          ERRCODE = 'SIDAD',
          MESSAGE = format('shard_0022.next_id_advance(%s): that id lies %s ahead of the clock, more than the %s ms the counter may be advanced without force',
                           min_id, make_interval(secs => ((floor_counter - reach) >> 10) / 1000.0), 3600000),
          HINT = 'check the id; if the counter really must move that far (every later id carries a future time), call next_id_advance(min_id, force => true)';
      END IF;
      -- Forward only, atomically with every nextval, where the shardid extension is
          -- installed (its C next_id() draws without the advisory lock, so a setval here
          -- could move the counter back under a value it drew): docs/uniqueness.md#the-c-generator.
          IF EXISTS (SELECT FROM pg_catalog.pg_extension e
                   JOIN pg_catalog.pg_depend d ON d.refobjid = e.oid
                   JOIN pg_catalog.pg_proc p ON p.oid = d.objid
                   JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                 WHERE e.extname = 'shardid' AND d.deptype = 'e'
                   AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                   AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                   AND p.proname = 'counter_raise' AND p.pronamespace = e.extnamespace
                   AND p.proargtypes = '2205 20'::pg_catalog.oidvector -- (regclass, bigint)
                   AND n.nspname = 'shardid_ext'
                   AND pg_catalog.has_schema_privilege(e.extnamespace, 'USAGE')
                   AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) THEN
            PERFORM shardid_ext.counter_raise('shard_0022.next_id_counter', floor_counter);
          ELSE
            PERFORM setval('shard_0022.next_id_counter', floor_counter, true);
          END IF;
      v := floor_counter;
    END IF;
    PERFORM pg_advisory_unlock(1936222564, 22);
  EXCEPTION WHEN OTHERS OR query_canceled THEN
    PERFORM pg_advisory_unlock(1936222564, 22);
    RAISE;
  END;
  RETURN v;
END
$shardid$;

-- Nothing that moves the counter arbitrarily is PUBLIC's (docs/uniqueness.md#privileges).
-- next_id_advance can push the counter to any value, up to its maximum, which
-- disables the generator for good: the owner's only (and roles it grants EXECUTE).
-- Right after the CREATE, and on every run, so running this SQL again repairs an
-- installation made by an older release, whose functions PUBLIC could execute
-- (CREATE OR REPLACE keeps a function's privileges; a new function gets PUBLIC's).
REVOKE ALL ON FUNCTION shard_0022.next_id_advance(bigint, boolean) FROM PUBLIC;

-- The generator, next_id(), in one of two forms with the same counter, layout and
-- marker (docs/uniqueness.md): plpgsql asked for (the PL/pgSQL form). Switching
-- between them is a CREATE OR REPLACE on the same counter: ids stay unique.
--
-- The PL/pgSQL form is a single SQL expression, so PostgreSQL inlines it into the
-- calling query (a column DEFAULT, a SELECT): no function call per id. Read it
-- inside out: if the counter lags the clock by more than 1 ms, pull it up;
-- take the shared lock; nextval; compose the id by inserting the shard bits
-- above the sequence bits; release the shared lock. Argument evaluation order
-- makes each step happen after the one before.
--
-- The C form (ext/shardid) is declared directly as the schema's function, with no
-- arguments: it reads its layout from the marker comment below, which only its
-- owner may write, and draws with nextval, raising a lagging counter to the clock
-- atomically, with no advisory lock. It depends on the extension, so the extension
-- cannot be dropped while a shard's DEFAULT uses it.
DO $generator$
DECLARE
  have_ext boolean := EXISTS (SELECT FROM pg_catalog.pg_extension
                              WHERE extname OPERATOR(pg_catalog.=) 'shardid' AND extversion OPERATOR(pg_catalog.=) '1.0');
  is_super boolean := (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) current_user);
  fn pg_catalog.regprocedure;
BEGIN
  IF 'plpgsql' OPERATOR(pg_catalog.=) 'c' AND NOT (have_ext AND is_super) THEN
    RAISE EXCEPTION USING
      ERRCODE = 'SIDGC',
      MESSAGE = pg_catalog.format('the C generator cannot be installed in schema shard_0022: %s',
                                  CASE WHEN NOT have_ext THEN 'the shardid extension 1.0 is not installed in this database'
                                       ELSE pg_catalog.format('role %s is not a superuser (only a superuser may declare a C function)', current_user) END),
      HINT = 'CREATE EXTENSION shardid VERSION ''1.0'' as a superuser (make ext installs it into the server), or install the PL/pgSQL generator';
  END IF;
  IF 'plpgsql' OPERATOR(pg_catalog.=) 'c' OR ('plpgsql' OPERATOR(pg_catalog.=) 'auto' AND have_ext AND is_super) THEN
    EXECUTE $ddl$
CREATE OR REPLACE FUNCTION shard_0022.next_id() RETURNS bigint
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS '$libdir/shardid', 'shardid_next_id'
$ddl$;
    fn := 'shard_0022.next_id()'::pg_catalog.regprocedure;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_depend
                   WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND objid OPERATOR(pg_catalog.=) fn
                     AND deptype OPERATOR(pg_catalog.=) 'x') THEN
      ALTER FUNCTION shard_0022.next_id() DEPENDS ON EXTENSION shardid;
    END IF;
  ELSE
    EXECUTE $ddl$
CREATE OR REPLACE FUNCTION shard_0022.next_id() RETURNS bigint
LANGUAGE sql VOLATILE AS $shardid$
SELECT overlay(pg_catalog.nextval(
         CASE WHEN (pg_catalog.pg_sequence_last_value('shard_0022.next_id_counter'::pg_catalog.regclass)
                      OPERATOR(pg_catalog.>=) ((pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint OPERATOR(pg_catalog.-) 1314220021722) OPERATOR(pg_catalog.<<) 10)
                    OR shard_0022.next_id_pull_up())
               AND pg_catalog.pg_advisory_lock_shared(1936222564, 22)::text OPERATOR(pg_catalog.=) ''
              THEN 'shard_0022.next_id_counter'::pg_catalog.regclass END
       )::bit(50) PLACING B'0000000010110' FROM 41 FOR 0)::bigint
       OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 22) THEN 0 END
$shardid$
$ddl$;
    -- A C generator replaced by this one leaves its dependency on the extension
    -- (CREATE OR REPLACE keeps it): the PL/pgSQL form needs none.
    fn := 'shard_0022.next_id()'::pg_catalog.regprocedure;
    IF EXISTS (SELECT FROM pg_catalog.pg_depend
               WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND objid OPERATOR(pg_catalog.=) fn
                 AND deptype OPERATOR(pg_catalog.=) 'x') THEN
      ALTER FUNCTION shard_0022.next_id() NO DEPENDS ON EXTENSION shardid;
    END IF;
  END IF;
END
$generator$;

-- A role with INSERT on a table may use the DEFAULT: it needs USAGE on the
-- schema (as for the table itself) and on the counter; burning counter values
-- can never cause a repeat.
GRANT USAGE, SELECT ON SEQUENCE shard_0022.next_id_counter TO PUBLIC;
-- setval (UPDATE) would move it anywhere: never PUBLIC's, whatever was granted before.
REVOKE UPDATE ON SEQUENCE shard_0022.next_id_counter FROM PUBLIC;

COMMENT ON FUNCTION shard_0022.next_id() IS 'shardid generator v2 variant=safe shard=22 epoch=1314220021721 layout=41/13/10';
-- Read ids inside PostgreSQL: the time, shard and sequence of a bigint id.
CREATE OR REPLACE FUNCTION shard_0022.id_time(id bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $shardid$
SELECT pg_catalog.to_timestamp(((id OPERATOR(pg_catalog.>>) 23) OPERATOR(pg_catalog.+) 1314220021721)::double precision OPERATOR(pg_catalog./) 1000)
$shardid$;
CREATE OR REPLACE FUNCTION shard_0022.id_shard(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $shardid$
SELECT ((id OPERATOR(pg_catalog.>>) 10) OPERATOR(pg_catalog.&) 8191)::integer
$shardid$;
CREATE OR REPLACE FUNCTION shard_0022.id_seq(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $shardid$
SELECT (id OPERATOR(pg_catalog.&) 1023)::integer
$shardid$;

-- The same check once more, now that everything is in place: an object another role
-- created meanwhile, and this SQL then replaced, keeps that role as its owner.
-- Who owns what is already here. Everything the toolkit relies on in this schema
-- (generator, counter, helpers, the fence's trigger function) must belong to the role
-- that runs this SQL: a role that owned one could replace it (a fence that lets every
-- write through, a pull-up that moves the counter anywhere), and CREATE OR REPLACE
-- run by a superuser would keep that owner. So nothing is created or replaced while
-- another role owns one of them: the error names the object and its owner
-- (docs/uniqueness.md#owners). A relation under the counter's name must be a sequence.
DO $shardid$
DECLARE
  o record;
BEGIN
  FOR o IN
    SELECT pg_catalog.format('function %s', p.oid::pg_catalog.regprocedure) AS what,
           pg_catalog.pg_get_userbyid(p.proowner) AS owner, true AS right_kind
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE n.nspname OPERATOR(pg_catalog.=) 'shard_0022'
       AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['next_id', 'next_id_pull_up', 'next_id_advance', 'id_time', 'id_shard', 'id_seq', 'shardid_fence']::pg_catalog.name[])
    UNION ALL
    SELECT pg_catalog.format('%s %s', CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' ELSE 'relation' END, c.oid::pg_catalog.regclass),
           pg_catalog.pg_get_userbyid(c.relowner), c.relkind OPERATOR(pg_catalog.=) 'S'
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE n.nspname OPERATOR(pg_catalog.=) 'shard_0022'
       AND c.relname OPERATOR(pg_catalog.=) ANY (ARRAY['next_id_counter', 'table_id_seq']::pg_catalog.name[])
  LOOP
    IF o.owner IS DISTINCT FROM current_user THEN
      RAISE EXCEPTION USING
        ERRCODE = 'SIDOW',
        MESSAGE = pg_catalog.format('%s is owned by role %s, not by %s, the role installing the shardid generator: refusing to create or replace anything in schema shard_0022', o.what, o.owner, current_user),
        HINT = 'another role created it (a role with CREATE on the schema?): check what it does, then drop it or ALTER ... OWNER TO the toolkit''s role, and run the install again';
    END IF;
    IF NOT o.right_kind THEN
      RAISE EXCEPTION USING
        ERRCODE = 'SIDOW',
        MESSAGE = pg_catalog.format('%s is not a sequence: refusing to install the shardid generator in schema shard_0022', o.what),
        HINT = 'drop it or rename it, and run the install again';
    END IF;
  END LOOP;
END
$shardid$;
COMMIT;

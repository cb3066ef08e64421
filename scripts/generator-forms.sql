-- The forms of next_id() compared in docs/benchmarks.md (issue 29's study), for a scratch
-- database only. Install shard 1's PL/pgSQL generator first:
--   shardid sql function --shard 1 --generator plpgsql | psql -v ON_ERROR_STOP=1 scratch
--   psql -v ON_ERROR_STOP=1 -f scripts/generator-forms.sql scratch
-- Every form draws from shard 1's counter under shard 1's advisory lock, as next_id() does;
-- none of them is installed by shardid, and the lower bounds are not generators (no clock,
-- no pull-up, no compose): they measure what any form of their kind costs at least.
CREATE SEQUENCE IF NOT EXISTS seq;
CREATE TABLE IF NOT EXISTS serial (id bigserial PRIMARY KEY, v int);
CREATE TABLE IF NOT EXISTS shard_0001.likes (id bigint PRIMARY KEY DEFAULT shard_0001.next_id(), v int);
-- v2, BEGIN ATOMIC: the same expression, stored parsed (PostgreSQL 14+).
CREATE OR REPLACE FUNCTION shard_0001.nid_atomic() RETURNS bigint LANGUAGE sql VOLATILE
BEGIN ATOMIC
SELECT overlay(pg_catalog.nextval(
         CASE WHEN (pg_catalog.pg_sequence_last_value('shard_0001.next_id_counter'::pg_catalog.regclass)
                      OPERATOR(pg_catalog.>=) ((pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint OPERATOR(pg_catalog.-) 1314220021722) OPERATOR(pg_catalog.<<) 10)
                    OR shard_0001.next_id_pull_up())
               AND pg_catalog.pg_advisory_lock_shared(1936222564, 1)::text OPERATOR(pg_catalog.=) ''
              THEN 'shard_0001.next_id_counter'::pg_catalog.regclass END
       )::bit(50) PLACING B'0000000000001' FROM 41 FOR 0)::bigint
       OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 1) THEN 0 END;
END;
-- PL/pgSQL RETURN of v2's expression: not inlined.
CREATE OR REPLACE FUNCTION shard_0001.nid_plret() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
RETURN overlay(pg_catalog.nextval(
         CASE WHEN (pg_catalog.pg_sequence_last_value('shard_0001.next_id_counter'::pg_catalog.regclass)
                      OPERATOR(pg_catalog.>=) ((pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint OPERATOR(pg_catalog.-) 1314220021722) OPERATOR(pg_catalog.<<) 10)
                    OR shard_0001.next_id_pull_up())
               AND pg_catalog.pg_advisory_lock_shared(1936222564, 1)::text OPERATOR(pg_catalog.=) ''
              THEN 'shard_0001.next_id_counter'::pg_catalog.regclass END
       )::bit(50) PLACING B'0000000000001' FROM 41 FOR 0)::bigint
       OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 1) THEN 0 END;
END $f$;
-- The lower bounds: shared lock, nextval, unlock; inlined (text body), and nextval only in PL/pgSQL.
CREATE OR REPLACE FUNCTION shard_0001.nid_min_sql() RETURNS bigint LANGUAGE sql VOLATILE AS $f$
SELECT pg_catalog.nextval(CASE WHEN pg_catalog.pg_advisory_lock_shared(1936222564, 1)::text OPERATOR(pg_catalog.=) '' THEN 'shard_0001.next_id_counter'::pg_catalog.regclass END)
  OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 1) THEN 0 END
$f$;
CREATE OR REPLACE FUNCTION shard_0001.nid_min_pl() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
RETURN pg_catalog.nextval('shard_0001.next_id_counter'::pg_catalog.regclass);
END $f$;
-- PL/pgSQL draw-first: draw under the fence, compose, or pull up and redraw when the value lags.
CREATE OR REPLACE FUNCTION shard_0001.nid_slow() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $f$
DECLARE c bigint;
BEGIN
  PERFORM shard_0001.next_id_pull_up();
  c := pg_catalog.nextval(CASE WHEN pg_catalog.pg_advisory_lock_shared(1936222564, 1)::text OPERATOR(pg_catalog.=) '' THEN 'shard_0001.next_id_counter'::pg_catalog.regclass END)
       OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 1) THEN 0 END;
  RETURN ((c >> 10) << 23) | 1024 | (c & 1023);
END $f$;
CREATE OR REPLACE FUNCTION shard_0001.nid_pl() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $f$
DECLARE c bigint;
BEGIN
  c := pg_catalog.nextval(CASE WHEN pg_catalog.pg_advisory_lock_shared(1936222564, 1)::text OPERATOR(pg_catalog.=) '' THEN 'shard_0001.next_id_counter'::pg_catalog.regclass END)
       OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 1) THEN 0 END;
  RETURN CASE WHEN c >= ((pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint OPERATOR(pg_catalog.-) 1314220021722) OPERATOR(pg_catalog.<<) 10)
              THEN ((c >> 10) << 23) | 1024 | (c & 1023)
              ELSE shard_0001.nid_slow() END;
END $f$;
create table if not exists t_nid_pl (id bigint primary key default shard_0001.nid_pl(), v int);
-- The inlined lower bound stored parsed, and the PL/pgSQL lower bound (fence and nextval).
CREATE OR REPLACE FUNCTION shard_0001.nid_min_atomic() RETURNS bigint LANGUAGE sql VOLATILE
BEGIN ATOMIC
SELECT pg_catalog.nextval(CASE WHEN pg_catalog.pg_advisory_lock_shared(1936222564, 1)::text OPERATOR(pg_catalog.=) '' THEN 'shard_0001.next_id_counter'::pg_catalog.regclass END)
  OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 1) THEN 0 END;
END;
CREATE OR REPLACE FUNCTION shard_0001.nid_min_plf() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
RETURN pg_catalog.nextval(CASE WHEN pg_catalog.pg_advisory_lock_shared(1936222564, 1)::text OPERATOR(pg_catalog.=) '' THEN 'shard_0001.next_id_counter'::pg_catalog.regclass END)
  OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.pg_advisory_unlock_shared(1936222564, 1) THEN 0 END;
END $f$;
CREATE TABLE IF NOT EXISTS t_nid_atomic (id bigint PRIMARY KEY DEFAULT shard_0001.nid_atomic(), v int);
CREATE TABLE IF NOT EXISTS t_nid_plret (id bigint PRIMARY KEY DEFAULT shard_0001.nid_plret(), v int);
CREATE TABLE IF NOT EXISTS t_nid_min_sql (id bigint PRIMARY KEY DEFAULT shard_0001.nid_min_sql(), v int);
CREATE TABLE IF NOT EXISTS t_nid_min_pl (id bigint PRIMARY KEY DEFAULT shard_0001.nid_min_pl(), v int);
CREATE TABLE IF NOT EXISTS t_nid_pl (id bigint PRIMARY KEY DEFAULT shard_0001.nid_pl(), v int);
CREATE TABLE IF NOT EXISTS t_nid_min_atomic (id bigint PRIMARY KEY DEFAULT shard_0001.nid_min_atomic(), v int);
CREATE TABLE IF NOT EXISTS t_nid_min_plf (id bigint PRIMARY KEY DEFAULT shard_0001.nid_min_plf(), v int);

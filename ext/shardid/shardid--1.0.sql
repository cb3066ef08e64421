-- shardid extension 1.0 (ext/shardid/README.md). A shard's next_id() is not
-- created here: the shard's install SQL declares it as a C function of its own
-- schema (LANGUAGE c, 'shardid_next_id'), dependent on this extension, so the
-- extension cannot be dropped while a shard uses it.
\echo Use "CREATE EXTENSION shardid" to load this file. \quit

-- The atomic, forward-only setval the toolkit's PL/pgSQL counter movers use
-- wherever this extension is installed (docs/uniqueness.md "The C generator").
-- It checks UPDATE on the counter as setval does; still not PUBLIC's: the
-- toolkit's SECURITY DEFINER movers run as the counter's owner, who is granted
-- it by the install (or is a superuser).
CREATE FUNCTION counter_raise(counter regclass, target bigint)
RETURNS bigint LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'shardid_counter_raise';
REVOKE ALL ON FUNCTION counter_raise(regclass, bigint) FROM PUBLIC;

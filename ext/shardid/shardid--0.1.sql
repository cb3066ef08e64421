CREATE FUNCTION next_id(counter regclass, shard int, seq_bits int, shard_bits int, epoch_ms bigint, lag_ms int, counter_max bigint)
RETURNS bigint LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'shardid_next_id';
REVOKE ALL ON FUNCTION next_id(regclass, int, int, int, bigint, int, bigint) FROM PUBLIC;

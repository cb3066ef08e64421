DROP TABLE IF EXISTS shardid.snowflake_leases;
DROP SEQUENCE IF EXISTS shardid.snowflake_lease_tokens;

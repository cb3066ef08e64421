DROP TABLE IF EXISTS shardid.snowflake_lease_marks;

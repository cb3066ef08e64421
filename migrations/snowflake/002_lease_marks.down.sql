DROP TRIGGER IF EXISTS keep_promise ON shardid.snowflake_leases;
DROP FUNCTION IF EXISTS shardid.snowflake_leases_keep_promise();
DROP TABLE IF EXISTS shardid.snowflake_lease_marks;
DROP FUNCTION IF EXISTS shardid.snowflake_lease_marks_keep();

DROP TABLE IF EXISTS shardid.console_audit;

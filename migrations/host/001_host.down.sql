DROP TABLE IF EXISTS shardid.local_shards;
DROP TABLE IF EXISTS shardid.host_info;

DROP TABLE IF EXISTS shardid.changes;
DROP TABLE IF EXISTS shardid.shards;
DROP TABLE IF EXISTS shardid.hosts;
DROP TABLE IF EXISTS shardid.cluster;

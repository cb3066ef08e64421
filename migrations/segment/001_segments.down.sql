DROP TABLE IF EXISTS shardid.segments;

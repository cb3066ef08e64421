DROP TABLE IF EXISTS shardid.moves;

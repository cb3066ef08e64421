DROP TABLE IF EXISTS shardid.catalog_readers;

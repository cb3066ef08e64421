DROP TABLE IF EXISTS shardid.host_secret;
ALTER TABLE shardid.host_info DROP COLUMN IF EXISTS cluster_identity;

ALTER TABLE shardid.moves DROP COLUMN target_token;

-- The cluster's identity stays: the hosts record it, and going up again
-- must find the catalog they belong to (a new random identity would make
-- init refuse every host). The column is harmless to older schemas.
DROP TABLE IF EXISTS shardid.host_secrets;

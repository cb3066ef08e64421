-- shardid.routes: where each logical shard lives, for clients in any
-- language (docs/routing.md), and part of the stable interface
-- (docs/compatibility.md). A view runs with its owner's privileges: a role
-- with CONNECT on the catalog database and SELECT on shardid.routes and
-- shardid.catalog_readers reads the map and nothing else (not the hosts'
-- secrets, the journal or the changes). USAGE on schema shardid lets it
-- name the view; the schema holds no function, and every table in it keeps
-- its own grants. dsn is the host's DSN as the catalog records it, which
-- holds no password (migration 014); generation is the catalog generation
-- of the shard's last change (its move, its state). Additive: older
-- binaries read on (min_reader stays).

CREATE VIEW shardid.routes AS
    SELECT s.id                 AS shard,
           s.host               AS host,
           h.dsn                AS dsn,
           s.schema_name        AS schema_name,
           s.state              AS state,
           s.changed_generation AS generation
      FROM shardid.shards s
      JOIN shardid.hosts h ON h.name = s.host;

COMMENT ON VIEW shardid.routes IS 'shardid: where each logical shard lives (docs/routing.md)';

GRANT USAGE ON SCHEMA shardid TO PUBLIC;

-- Which catalog owns this host, and the host's secret
-- (docs/operations.md#identity). cluster_identity is the catalog's
-- shardid.cluster.identity (catalog migration 16), written by init;
-- NULL on a host recorded by an older binary until init runs.
-- host_secret is a random secret whose SHA-256 the catalog keeps: set-dsn
-- and failover accept a database as this host only when it holds it.
-- Nobody but its owner (the toolkit's role) may read it.

ALTER TABLE shardid.host_info ADD COLUMN cluster_identity uuid;

CREATE TABLE shardid.host_secret (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    secret      bytea       NOT NULL CHECK (pg_catalog.length(secret) = 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON shardid.host_secret FROM PUBLIC;

-- The cluster's identity and each host's secret (docs/operations.md#identity).
--
-- identity is random, made once with the catalog and carried by a dump
-- and restore of it (unlike the catalog server's system identifier):
-- init writes it to every host (shardid.host_info.cluster_identity, host
-- migration 2), and refuses a host that records another, so that a
-- catalog reached by mistake (a typo in its database name) cannot claim
-- the hosts of another.
--
-- host_secrets holds the SHA-256 of a random secret that init writes to
-- each host's database (shardid.host_secret, readable by the toolkit's
-- role only): set-dsn and failover accept a database as the host's only
-- when it holds the secret, which a role that forges shardid.host_info
-- elsewhere does not know. No role but the toolkit's is granted this
-- table (routing roles read cluster, hosts, shards, catalog_migrations
-- and catalog_readers: docs/upgrading.md), and it holds only hashes.
--
-- New column and table: older binaries read on (min_reader stays).

-- IF NOT EXISTS: the down migration keeps the column, so that the hosts
-- still find their catalog after a down and up again.
ALTER TABLE shardid.cluster ADD COLUMN IF NOT EXISTS identity uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();

CREATE TABLE shardid.host_secrets (
    host        text        PRIMARY KEY REFERENCES shardid.hosts (name) ON UPDATE CASCADE ON DELETE CASCADE,
    secret_sha256 bytea     NOT NULL CHECK (pg_catalog.length(secret_sha256) = 32),
    recorded_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON shardid.host_secrets FROM PUBLIC;
